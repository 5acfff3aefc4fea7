// Package queueidle tells when the controller's first reconcile pass is over: at start every
// informer lists its kind and every reconciler's queue holds every object, and work that reads
// the cluster besides (the OLM audit, the cleanup tracker) would add its reads to that peak (on a
// cluster of 2,000 namespaces, 40 MiB: docs/performance.md, "A cluster of 2,000 namespaces").
package queueidle

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// MaxWait bounds the wait for idle queues; Poll is how often they are read.
const (
	MaxWait = 5 * time.Minute
	Poll    = 2 * time.Second
)

// QueuesIdle reports whether every reconciler's work queue is empty and no worker is busy, read
// from g (controller-runtime's metrics registry): controller-runtime exports both for every
// controller it runs.
func QueuesIdle(g prometheus.Gatherer) func() bool {
	return func() bool {
		families, err := g.Gather()
		if err != nil {
			return true // nothing to wait for that can be read
		}
		for _, f := range families {
			switch f.GetName() {
			case "workqueue_depth", "controller_runtime_active_workers":
				for _, m := range f.GetMetric() {
					if m.GetGauge().GetValue() != 0 {
						return false
					}
				}
			}
		}
		return true
	}
}

// Wait returns once idle() held at two polls in a row (the first events of the informers reach
// the queues a moment after the caches report synced), after wait, or when ctx ends.
func Wait(ctx context.Context, idle func() bool, poll, wait time.Duration) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	t := time.NewTicker(poll)
	defer t.Stop()
	quiet := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-t.C:
		}
		if !idle() {
			quiet = 0
			continue
		}
		if quiet++; quiet == 2 {
			return
		}
	}
}
