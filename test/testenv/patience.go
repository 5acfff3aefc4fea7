package testenv

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/olmguard/olmguard/test/procs"
)

// Patience is how long a test waits for a state or an event before it calls it a hang and fails:
// a Job completing, a reconciler's repair, a server becoming ready, a process exiting. It is no
// promise of speed: a slow, busy machine takes longer than a quiet one, never this long. Tests
// check how olmguard works (an ordering, a state, a count), not how fast; timings are logged, and
// measured by the benchmarks.
const Patience = 2 * time.Minute

// Poll waits up to Patience for cond, polling every 100 ms: Eventually for code that returns an
// error instead of failing a test (the real-OLM scenarios that make demo replays too).
func Poll(ctx context.Context, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, Patience)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond)
}

// Eventually polls cond every 100 ms until it holds, and fails the test with what if it does not
// within Patience or returns an error. It logs how long it waited (reported, never asserted).
func Eventually(tb testing.TB, what string, cond func(ctx context.Context) (bool, error)) {
	tb.Helper()
	EventuallyExplained(tb, what, func(ctx context.Context) (bool, string, error) {
		done, err := cond(ctx)
		return done, "", err
	})
}

// EventuallyExplained is Eventually for a cond that also says what it saw when it does not hold
// yet: on a hang the test fails with the last of those, which is what a reader needs to tell
// which part of a compound state never came.
func EventuallyExplained(tb testing.TB, what string, cond func(ctx context.Context) (done bool, saw string, err error)) {
	tb.Helper()
	var last string
	start := time.Now()
	err := Poll(context.Background(), func(ctx context.Context) (bool, error) {
		done, saw, err := cond(ctx)
		if saw != "" {
			last = saw
		}
		return done, err
	})
	if err != nil && last == "" {
		tb.Fatalf("%s: not within %s: %v", what, Patience, err)
	}
	if err != nil {
		tb.Fatalf("%s: not within %s: %v; last seen: %s", what, Patience, err, last)
	}
	tb.Logf("%s after %s", what, time.Since(start).Round(10*time.Millisecond))
}

// FreePort returns a loopback TCP port free at the time of the call.
func FreePort(tb testing.TB) int {
	tb.Helper()
	port, err := procs.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return port
}
