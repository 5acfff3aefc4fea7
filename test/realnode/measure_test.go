package realnode

// Figures of olmguard in its pods for docs/performance.md: each container's memory working set
// from its cgroup, idle and under a burst of admissions, and the latency the webhook adds to an
// InstallPlan create through the kube-apiserver. Reported as RESULT lines, never asserted
// against a time; the one assertion is that no container comes near its memory limit.

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/node"
	"github.com/olmguard/olmguard/test/scenario"
)

// EnvMeasureScale multiplies the measurement's sizes (make bench-realnode sets 10).
const EnvMeasureScale = "OLMGUARD_MEASURE_SCALE"

func measureScale() int {
	if n, err := strconv.Atoi(os.Getenv(EnvMeasureScale)); err == nil && n > 0 {
		return n
	}
	return 1
}

// containerMemory follows the working set of every container of olmguard's pods.
type containerMemory struct {
	containers map[string]*node.Container // by "<component> <pod>"
	limits     map[string]int64
	mu         sync.Mutex
	peak       map[string]int64
}

func watchMemory(t *testing.T, c *cluster.Cluster) *containerMemory {
	t.Helper()
	m := &containerMemory{containers: map[string]*node.Container{}, limits: map[string]int64{}, peak: map[string]int64{}}
	for _, component := range []string{"webhook", "controller"} {
		for _, p := range componentPods(t, c, component) {
			ctr, err := node.ContainerOf(&p, component)
			if err != nil {
				t.Fatal(err)
			}
			name := component + " " + p.Name
			m.containers[name] = ctr
			if lim, ok := p.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; ok {
				m.limits[name] = lim.Value()
			}
		}
	}
	return m
}

// sample reads every container's working set once and keeps the peaks.
func (m *containerMemory) sample() map[string]int64 {
	now := map[string]int64{}
	for name, ctr := range m.containers {
		if ws, err := ctr.WorkingSet(); err == nil {
			now[name] = ws
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, ws := range now {
		m.peak[name] = max(m.peak[name], ws)
	}
	return now
}

// cpu reads every container's CPU time.
func (m *containerMemory) cpu() map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, ctr := range m.containers {
		if d, err := ctr.CPUTime(); err == nil {
			out[name] = d
		}
	}
	return out
}

func (m *containerMemory) report(t *testing.T, what string, ws map[string]int64) {
	t.Helper()
	names := make([]string, 0, len(ws))
	for name := range ws {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		t.Logf("RESULT memory %s, %s: working set %.1f MiB (limit %.0f MiB)", what, name, mib(ws[name]), mib(m.limits[name]))
		// Half the limit: Go's GOMEMLIMIT is the limit, so a container far past half of it would
		// spend its CPU on garbage collection long before an OOM kill.
		if lim := m.limits[name]; lim > 0 && ws[name] > lim/2 {
			t.Errorf("%s uses %.1f MiB %s, more than half its %.0f MiB limit", name, mib(ws[name]), what, mib(lim))
		}
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// testMeasureInPods reports the memory of each container idle and under load and the latency
// the webhook in its pods adds to an InstallPlan create.
func testMeasureInPods(t *testing.T, c *cluster.Cluster, jobsNS string) {
	scale := measureScale()
	m := watchMemory(t, c)
	m.report(t, "idle", m.sample())

	// Under load: InstallPlans created for real (the controller watches and checks each) and
	// unpack Jobs, back to back from 6 workers.
	n := int64(2000 * scale)
	cpuBefore := m.cpu()
	l := startLoad(newAdmissions(t, c, "realnode-measure", jobsNS, true), 6)
	began := time.Now()
	for l.Sent() < n {
		m.sample()
		time.Sleep(250 * time.Millisecond)
	}
	l.Stop()
	l.Check(t, "memory under load")
	elapsed := time.Since(began)
	cpuAfter := m.cpu()
	m.sample()
	m.mu.Lock()
	peak := maps.Clone(m.peak)
	m.mu.Unlock()
	t.Logf("RESULT load: %d admissions in %s (%.0f/s)", l.Sent(), elapsed.Round(100*time.Millisecond), float64(l.Sent())/elapsed.Seconds())
	m.report(t, fmt.Sprintf("peak under %d admissions", l.Sent()), peak)
	for name, before := range cpuBefore {
		used := cpuAfter[name] - before
		t.Logf("RESULT CPU under %d admissions, %s: %s, %.0f millicores on average", l.Sent(), name, used.Round(time.Millisecond), 1000*used.Seconds()/elapsed.Seconds())
	}

	measureAddedLatency(t, c, 300*scale)
}

// measureAddedLatency creates dry-run InstallPlans one at a time, alternating between a namespace
// the webhook serves (with a Subscription: the webhook looks it up and adds the owner) and
// olmguard's own namespace, which its webhook configurations exclude: the difference is what the
// webhook in its pods adds, through the Service, TLS and the lookup.
func measureAddedLatency(t *testing.T, c *cluster.Cluster, pairs int) {
	ctx := context.Background()
	a := newAdmissions(t, c, "realnode-latency", "", false)
	var on, off []time.Duration
	for i := range 2 * pairs {
		ns := a.sub.Namespace
		if i%2 == 1 {
			ns = olmguard.DefaultNamespace
		}
		ip := builders.InstallPlan(ns)
		start := time.Now()
		if err := c.Client.Create(ctx, ip, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		if ns == olmguard.DefaultNamespace {
			off = append(off, d)
			continue
		}
		if !scenario.OwnedBy(ip, a.sub.UID) {
			t.Fatalf("a plan came back without olmguard's owner")
		}
		on = append(on, d)
	}
	p := func(ds []time.Duration, q float64) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[min(len(s)-1, int(q*float64(len(s))))]
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	t.Logf("RESULT InstallPlan CREATE through the kube-apiserver, %d each: webhook off p50 %.2f / p99 %.2f ms, on %.2f / %.2f ms, added %.2f / %.2f ms",
		pairs, ms(p(off, 0.5)), ms(p(off, 0.99)), ms(p(on, 0.5)), ms(p(on, 0.99)), ms(p(on, 0.5)-p(off, 0.5)), ms(p(on, 0.99)-p(off, 0.99)))
}
