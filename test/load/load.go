// Package load sends admissions back to back from a few workers while a test disrupts olmguard
// (kills or deletes its webhook, rotates its certificates) and counts how each came back: mutated
// by olmguard, unmutated (the apiserver let it through without olmguard's answer), answered
// unchanged because olmguard's lookup timed out, or failed.
//
// The third kind is the busy machine, not the disruption: olmguard answered, in time, that the
// apiserver did not list what it asked for within its lookup budget (the controller repairs such
// objects later). It is reported, never failed on, so that a test of a disruption fails only for
// the disruption, however loaded the machine is.
package load

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/olmguard/olmguard/pkg/admit"
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

	sent, mutated, unmutated, slow, failed atomic.Int64

	mu      sync.Mutex
	missed  []string // each unmutated admission: its kind and when it came back
	slowAt  []string // each admission answered unchanged because a lookup timed out
	lastErr error
}

// Config returns a copy of cfg whose admission warnings reach the load: the Admit of a Load must
// send its requests with a client of it, and with the context it is given, for the load to tell an
// admission olmguard answered unchanged (its lookup timed out) from one it never answered.
func Config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = warningRouter{}
	return cfg
}

// warningRouter hands each warning to the request that received it, through its context.
type warningRouter struct{}

type warningsKey struct{}

type requestWarnings struct {
	mu   sync.Mutex
	msgs []string
}

func (warningRouter) HandleWarningHeaderWithContext(ctx context.Context, _ int, _ string, msg string) {
	if w, ok := ctx.Value(warningsKey{}).(*requestWarnings); ok {
		w.mu.Lock()
		w.msgs = append(w.msgs, msg)
		w.mu.Unlock()
	}
}

// LookupTimedOut reports whether one of an admission's warnings says olmguard left it unchanged
// because a lookup ran out of time ("context deadline exceeded", or the client's rate limiter
// saying it "would exceed context deadline").
func LookupTimedOut(warnings []string) bool {
	for _, w := range warnings {
		if strings.HasPrefix(w, admit.LookupFailedWarning) && strings.Contains(w, "deadline") {
			return true
		}
	}
	return false
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
		warnings := &requestWarnings{}
		kind, ok, err := l.admit(context.WithValue(l.ctx, warningsKey{}, warnings), l.sent.Add(1))
		warnings.mu.Lock()
		timedOut := LookupTimedOut(warnings.msgs)
		warnings.mu.Unlock()
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
		case timedOut:
			l.slow.Add(1)
			l.mu.Lock()
			l.slowAt = append(l.slowAt, fmt.Sprintf("%s at +%s", kind, time.Since(l.began).Round(time.Millisecond)))
			l.mu.Unlock()
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
// request, or when nothing was sent or none was mutated.
func (l *Load) Check(t testing.TB, what string) { l.CheckExcusing(t, what, 0, "") }

// CheckExcusing is Check that lets up to excused admissions come back without olmguard's answer,
// for a cause the caller established (why) other than the disruption under test: the kube-apiserver
// giving up waiting for an answer on a busy machine.
func (l *Load) CheckExcusing(t testing.TB, what string, excused int64, why string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%s: %d admissions in %s (%.0f/s), %d mutated, %d unmutated, %d answered unchanged (lookup timed out), %d failed", what, l.sent.Load(),
		l.Elapsed().Round(time.Millisecond), float64(l.sent.Load())/l.Elapsed().Seconds(), l.mutated.Load(), l.unmutated.Load(), l.slow.Load(), l.failed.Load())
	if n := l.slow.Load(); n > 0 {
		t.Logf("%s: %d admissions olmguard answered in time but unchanged, its lookup out of time on this busy machine (the controller repairs them): %v", what, n, l.slowAt)
	}
	if l.sent.Load() == 0 {
		t.Errorf("%s: no admission was sent", what)
	}
	if l.sent.Load() > 0 && l.mutated.Load() == 0 {
		t.Errorf("%s: olmguard mutated none of the %d admissions", what, l.sent.Load())
	}
	switch n := l.unmutated.Load(); {
	case n > excused:
		t.Errorf("%s: %d admissions came back without olmguard's answer (the load began at %s): %v", what, n, l.began.Format("15:04:05.000"), l.missed)
	case n > 0:
		t.Logf("%s: %d admissions came back without olmguard's answer, each accounted for by %s: %v", what, n, why, l.missed)
	}
	if n := l.failed.Load(); n > 0 {
		t.Errorf("%s: %d admissions failed, the last: %v", what, n, l.lastErr)
	}
}
