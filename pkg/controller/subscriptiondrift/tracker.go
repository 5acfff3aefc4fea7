package subscriptiondrift

import "time"

// Action is what the reconciler does with a Subscription in drift.
type Action string

const (
	// Wait: the drift is younger than the window; OLM may still catch up.
	Wait Action = "Wait"
	// Report: the drift outlived the window: Warning Event, metric, F1 repair, nudge.
	Report Action = "Report"
	// Nudge: still in the same drift after a report: bump the resync annotation again.
	Nudge Action = "Nudge"
)

// maxNudgeInterval caps the back-off between nudges of a Subscription that stays in drift.
const maxNudgeInterval = 10 * time.Minute

// Episode is one Subscription's current drift: what it looks like and since when.
type Episode struct {
	// Signature identifies the drift (the differences); a new signature starts a new episode.
	Signature string
	Since     time.Time
	Reported  bool
	Nudges    int
	LastNudge time.Time
}

// Next decides what to do with a Subscription whose drift has signature sig at now, given its
// previous episode (zero if none). It returns the updated episode, the action, and when to look
// again. A changing drift is a moving OLM, not a stuck one: it restarts the window.
func Next(prev Episode, sig string, now time.Time, window time.Duration) (Episode, Action, time.Duration) {
	e := prev
	if e.Signature != sig || e.Since.IsZero() {
		e = Episode{Signature: sig, Since: now}
	}
	if wait := e.Since.Add(window).Sub(now); wait > 0 {
		return e, Wait, wait
	}
	if !e.Reported {
		e.Reported, e.Nudges, e.LastNudge = true, 1, now
		return e, Report, nudgeInterval(window, 1)
	}
	if wait := e.LastNudge.Add(nudgeInterval(window, e.Nudges)).Sub(now); wait > 0 {
		return e, Wait, wait
	}
	e.Nudges++
	e.LastNudge = now
	return e, Nudge, nudgeInterval(window, e.Nudges)
}

// nudgeInterval doubles from the window with each nudge, up to maxNudgeInterval.
func nudgeInterval(window time.Duration, nudges int) time.Duration {
	d := window
	for i := 1; i < nudges && d < maxNudgeInterval; i++ {
		d *= 2
	}
	return min(d, maxNudgeInterval)
}
