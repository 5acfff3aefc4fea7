package drift

import (
	"encoding/json"
	"time"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

// NudgePatch is the merge patch that bumps olmguard's resync annotation on a Subscription to now.
// It changes metadata only, yet it is a Subscription event for OLM's catalog-operator: the
// subscription syncer recomputes the conditions, and the namespace is resolved again at once,
// whatever back-off a failed resolution had put it under.
func NudgePatch(now time.Time) []byte {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		olmguard.ResyncAnnotation: now.UTC().Format(time.RFC3339Nano)}}}) // a map of strings always marshals
	return body
}
