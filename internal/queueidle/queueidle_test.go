package queueidle

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Wait waits for two idle readings in a row, for at most its wait, and not past the
// end of its context. Deterministic: the wait is an hour, so only the readings end it.
func TestWaitIdle(t *testing.T) {
	for _, tc := range []struct {
		name     string
		readings []bool
		want     int // readings taken when Wait returns
	}{
		{"idle at once", []bool{true, true}, 2},
		{"a busy reading starts the count again", []bool{true, false, true, false, false, true, true}, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 0
			idle := func() bool {
				if n >= len(tc.readings) {
					t.Fatalf("reading %d taken after the queues were idle twice", n+1)
				}
				n++
				return tc.readings[n-1]
			}
			Wait(context.Background(), idle, time.Millisecond, time.Hour)
			if n != tc.want {
				t.Errorf("returned after %d readings, want %d", n, tc.want)
			}
		})
	}
	t.Run("never idle: the wait ends it", func(t *testing.T) {
		Wait(context.Background(), func() bool { return false }, time.Millisecond, 20*time.Millisecond)
	})
	t.Run("never idle: the context ends it", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		Wait(ctx, func() bool {
			if n++; n == 3 {
				cancel()
			}
			return false
		}, time.Millisecond, time.Hour)
	})
}

// QueuesIdle reads controller-runtime's gauges: any queue with work, or any busy worker, is not
// idle; no reconciler at all is.
func TestQueuesIdle(t *testing.T) {
	reg := prometheus.NewRegistry()
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth"}, []string{"name"})
	workers := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "controller_runtime_active_workers"}, []string{"controller"})
	other := prometheus.NewGauge(prometheus.GaugeOpts{Name: "unrelated"})
	reg.MustRegister(depth, workers, other)
	idle := QueuesIdle(reg)
	if !idle() {
		t.Error("no reconciler: not idle")
	}
	depth.WithLabelValues("csv-cleanup").Set(0)
	workers.WithLabelValues("csv-cleanup").Set(0)
	other.Set(5)
	if !idle() {
		t.Error("empty queues, no busy worker: not idle")
	}
	depth.WithLabelValues("installplan-owners").Set(20000)
	if idle() {
		t.Error("a queue of 20,000: idle")
	}
	depth.WithLabelValues("installplan-owners").Set(0)
	workers.WithLabelValues("csv-cleanup").Set(1)
	if idle() {
		t.Error("a busy worker: idle")
	}
}
