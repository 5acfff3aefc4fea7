// Package load sends admissions back to back from a few workers while a test disrupts olmguard
// (kills or deletes its webhook, rotates its certificates) and counts how each came back: mutated
// by olmguard, unmutated (the apiserver let it through without olmguard's answer), or failed.
package load

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Admit sends the i-th admission (i counts from 1) and reports its kind and whether olmguard
// mutated it.
type Admit func(ctx context.Context, i int64) (kind string, mutated bool, err error)

// Load is a running load.
type Load struct {
	ctx      context.Context
	admit    Admit
	wg       sync.WaitGroup
	stopping atomic.Bool
	began    time.Time
	ended    time.Time

	sent, mutated, unmutated, failed atomic.Int64

	mu      sync.Mutex
	missed  []string // each unmutated admission: its kind and when it came back
	lastErr error
}

// Start runs workers that call admit back to back until Stop, or until ctx ends (a test's
// deadline: the admission in flight is then dropped, not counted).
func Start(ctx context.Context, admit Admit, workers int) *Load {
	l := &Load{ctx: ctx, admit: admit, began: time.Now()}
	for range workers {
		l.wg.Add(1)
		go l.work()
	}
	return l
}

// work finishes its request when stopped: a request cancelled in flight would cancel the
// apiserver's call to the webhook, which the apiserver counts as a failed call.
func (l *Load) work() {
	defer l.wg.Done()
	for !l.stopping.Load() && l.ctx.Err() == nil {
		kind, ok, err := l.admit(l.ctx, l.sent.Add(1))
		switch {
		case l.ctx.Err() != nil:
			l.sent.Add(-1)
			return
		case err != nil:
			l.failed.Add(1)
			l.mu.Lock()
			l.lastErr = err
			l.mu.Unlock()
		case ok:
			l.mutated.Add(1)
		default:
			l.unmutated.Add(1)
			l.mu.Lock()
			l.missed = append(l.missed, fmt.Sprintf("%s at +%s", kind, time.Since(l.began).Round(time.Millisecond)))
			l.mu.Unlock()
		}
	}
}

// Stop waits for the workers' last admissions.
func (l *Load) Stop() {
	l.stopping.Store(true)
	l.wg.Wait()
	l.ended = time.Now()
}

// Sent counts the admissions sent so far.
func (l *Load) Sent() int64 { return l.sent.Load() }

// Mutated counts the admissions olmguard answered.
func (l *Load) Mutated() int64 { return l.mutated.Load() }

// Elapsed is how long the load ran (until Stop).
func (l *Load) Elapsed() time.Duration { return l.ended.Sub(l.began) }

// Check logs the counts and fails t on any admission without olmguard's answer or any failed
// request, or when nothing was sent.
func (l *Load) Check(t testing.TB, what string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%s: %d admissions in %s (%.0f/s), %d mutated, %d unmutated, %d failed", what, l.sent.Load(),
		l.Elapsed().Round(time.Millisecond), float64(l.sent.Load())/l.Elapsed().Seconds(), l.mutated.Load(), l.unmutated.Load(), l.failed.Load())
	if l.sent.Load() == 0 {
		t.Errorf("%s: no admission was sent", what)
	}
	if n := l.unmutated.Load(); n > 0 {
		t.Errorf("%s: %d admissions came back without olmguard's answer (the load began at %s): %v", what, n, l.began.Format("15:04:05.000"), l.missed)
	}
	if n := l.failed.Load(); n > 0 {
		t.Errorf("%s: %d admissions failed, the last: %v", what, n, l.lastErr)
	}
}
