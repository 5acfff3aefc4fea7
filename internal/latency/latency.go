// Package latency records per-operation durations in benchmarks and reports percentiles beside
// ns/op, so `make bench` (with benchstat) shows tail latency, not only the mean.
package latency

import (
	"slices"
	"testing"
	"time"
)

// Recorder collects durations.
type Recorder struct{ d []time.Duration }

// Time runs f and records how long it took.
func (r *Recorder) Time(f func()) {
	start := time.Now()
	f()
	r.d = append(r.d, time.Since(start))
}

// Percentile returns the p-th percentile (0 < p <= 100), or 0 with no samples.
func (r *Recorder) Percentile(p float64) time.Duration {
	if len(r.d) == 0 {
		return 0
	}
	s := slices.Clone(r.d)
	slices.Sort(s)
	i := int(float64(len(s)) * p / 100)
	return s[min(i, len(s)-1)]
}

// Report adds p50-ns and p99-ns metrics to the benchmark.
func (r *Recorder) Report(b *testing.B) { r.ReportAs(b, "") }

// ReportAs adds <name>-p50-ns and <name>-p99-ns metrics, for benchmarks that time several kinds
// of operation in one loop (p50-ns and p99-ns with an empty name).
func (r *Recorder) ReportAs(b *testing.B, name string) {
	if name != "" {
		name += "-"
	}
	b.ReportMetric(float64(r.Percentile(50).Nanoseconds()), name+"p50-ns")
	b.ReportMetric(float64(r.Percentile(99).Nanoseconds()), name+"p99-ns")
}
