// Package firstlist keeps the Create events of an informer's initial list to the objects a
// reconciler would act on. On every start (and every new leadership) controller-runtime hands a
// reconciler every object of the kinds it watches, and its work queue keeps the size of that pass
// after it: on a cluster of 2,000 namespaces, 20,000 Subscriptions and 20,000 InstallPlans in each
// of two queues, 9 MB at the controller's peak and 7 MB kept (docs/performance.md, "Fifth round").
// Events after the initial list always pass.
package firstlist

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// MaxWait bounds how long the decisions of one predicate may wait, all together, for the cache
// they read (an informer still listing), from the first initial-list event: past it, every object
// is kept, as it is when a decision cannot read the cache at all. A cache that never syncs (a kind
// olmguard may not list) then delays the queue by MaxWait once, not once per object.
const MaxWait = 5 * time.Minute

// Skip drops every Create event of the initial list: for a watch whose objects only stand for
// others, whose own initial events decide.
func Skip() predicate.Funcs {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList }}
}

// Unless keeps a Create event of the initial list only when acts says the reconciler would act on
// the object (or the object is not a T). acts reads the cache through ctx, which ends MaxWait
// after the predicate's first initial-list event; an error keeps the object.
func Unless[T client.Object](acts func(ctx context.Context, obj T) (bool, error)) predicate.Funcs {
	return unlessWithin(MaxWait, acts)
}

func unlessWithin[T client.Object](maxWait time.Duration, acts func(ctx context.Context, obj T) (bool, error)) predicate.Funcs {
	var (
		mu       sync.Mutex
		deadline time.Time
	)
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool {
		obj, ok := e.Object.(T)
		if !e.IsInInitialList || !ok {
			return true
		}
		mu.Lock()
		if deadline.IsZero() {
			deadline = time.Now().Add(maxWait)
		}
		d := deadline
		mu.Unlock()
		ctx, cancel := context.WithDeadline(context.Background(), d)
		defer cancel()
		act, err := acts(ctx, obj)
		return act || err != nil
	}}
}
