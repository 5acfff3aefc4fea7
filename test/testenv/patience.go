package testenv

import "time"

// Patience is how long a test waits for a state or an event before it calls it a hang and fails:
// a Job completing, a reconciler's repair, a server becoming ready, a process exiting. It is no
// promise of speed: a slow, busy machine takes longer than a quiet one, never this long. Tests
// check how olmguard works (an ordering, a state, a count), not how fast; timings are logged, and
// measured by the benchmarks.
const Patience = 2 * time.Minute
