package subscriptiondrift

import (
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	window := 30 * time.Second
	type step struct {
		at        time.Duration
		sig       string
		action    Action
		requeue   time.Duration
		sinceFrom time.Duration
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"reported once the window has passed", []step{
			{0, "a", Wait, 30 * time.Second, 0},
			{10 * time.Second, "a", Wait, 20 * time.Second, 0},
			{30 * time.Second, "a", Report, 30 * time.Second, 0},
		}},
		{"a changing drift restarts the window (OLM is moving)", []step{
			{0, "a", Wait, 30 * time.Second, 0},
			{20 * time.Second, "b", Wait, 30 * time.Second, 20 * time.Second},
			{40 * time.Second, "b", Wait, 10 * time.Second, 20 * time.Second},
			{50 * time.Second, "b", Report, 30 * time.Second, 20 * time.Second},
		}},
		{"nudges back off after the report", []step{
			{0, "a", Wait, 30 * time.Second, 0},
			{30 * time.Second, "a", Report, 30 * time.Second, 0},
			{45 * time.Second, "a", Wait, 15 * time.Second, 0},
			{60 * time.Second, "a", Nudge, 60 * time.Second, 0},
			{120 * time.Second, "a", Nudge, 120 * time.Second, 0},
			{240 * time.Second, "a", Nudge, 240 * time.Second, 0},
			{480 * time.Second, "a", Nudge, 480 * time.Second, 0},
			{960 * time.Second, "a", Nudge, 10 * time.Minute, 0},
			{960*time.Second + 10*time.Minute, "a", Nudge, 10 * time.Minute, 0},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e Episode
			for i, s := range tc.steps {
				var a Action
				var d time.Duration
				e, a, d = Next(e, s.sig, t0.Add(s.at), window)
				if a != s.action || d != s.requeue {
					t.Fatalf("step %d at %s: got %s after %s, want %s after %s", i, s.at, a, d, s.action, s.requeue)
				}
				if want := t0.Add(s.sinceFrom); !e.Since.Equal(want) {
					t.Fatalf("step %d: episode since %s, want %s", i, e.Since, want)
				}
			}
		})
	}
}
