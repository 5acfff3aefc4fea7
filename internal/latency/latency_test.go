package latency

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var r Recorder
	if r.Percentile(99) != 0 {
		t.Fatal("no samples must give 0")
	}
	for i := 100; i >= 1; i-- {
		r.d = append(r.d, time.Duration(i)*time.Millisecond)
	}
	if p := r.Percentile(50); p != 51*time.Millisecond {
		t.Errorf("p50 = %s", p)
	}
	if p := r.Percentile(99); p != 100*time.Millisecond {
		t.Errorf("p99 = %s", p)
	}
	if p := r.Percentile(100); p != 100*time.Millisecond {
		t.Errorf("p100 = %s", p)
	}
}
