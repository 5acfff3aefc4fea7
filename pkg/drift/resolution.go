package drift

import (
	"regexp"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// ReasonConstraintsNotSatisfiable is the ResolutionFailed reason OLM does not retry by itself
// (solver.NotSatisfiable: no requeue, olm-facts.md §2.2(b)).
const ReasonConstraintsNotSatisfiable = "ConstraintsNotSatisfiable"

// existingCSV is how OLM's solver names an installed CSV in the failure's message:
// "@existing/<namespace>//<CSV name>".
var existingCSV = regexp.MustCompile(`@existing/([a-z0-9][-a-z0-9]*)//([a-z0-9][-a-z0-9.]*[a-z0-9])`)

// BlamedCSVs returns the installed CSVs of sub's namespace that its ResolutionFailed condition
// (ConstraintsNotSatisfiable, True) names, each once, in the message's order; nil without such a
// condition.
func BlamedCSVs(sub *v1alpha1.Subscription) []string {
	c := sub.Status.GetCondition(v1alpha1.SubscriptionResolutionFailed)
	if c == nil || c.Status != corev1.ConditionTrue || c.Reason != ReasonConstraintsNotSatisfiable {
		return nil
	}
	var out []string
	for _, m := range existingCSV.FindAllStringSubmatch(c.Message, -1) {
		if m[1] == sub.Namespace && !slices.Contains(out, m[2]) {
			out = append(out, m[2])
		}
	}
	return out
}

// StaleResolution returns the CSVs that sub's unsatisfiable resolution blames and that no longer
// exist. OLM resolves a namespace on events and does not retry this failure: when the blamed CSV
// was a replaced one whose deletion OLM's cache had not yet seen, the failure outlives its cause
// and the Subscription never upgrades (seen in the real-OLM tier on OLM v0.46.0: v1 -> v2
// succeeded, v3 never planned). A nudge makes OLM resolve again.
func StaleResolution(sub *v1alpha1.Subscription, exists func(name string) bool) []string {
	var gone []string
	for _, name := range BlamedCSVs(sub) {
		if !exists(name) {
			gone = append(gone, name)
		}
	}
	return gone
}

// LastNudge is when olmguard last bumped sub's resync annotation (zero: never or unreadable).
func LastNudge(sub *v1alpha1.Subscription) time.Time {
	t, err := time.Parse(time.RFC3339Nano, sub.Annotations[olmguard.ResyncAnnotation])
	if err != nil {
		return time.Time{}
	}
	return t
}

// Actionable reports whether the subscription-drift reconciler has something to look at in sub,
// plan being the one PlanKey names (nil when it does not exist): its conditions disagree with the
// plan (Compare), or its unsatisfiable resolution blames installed CSVs, which may be gone
// (StaleResolution). Any other Subscription it only forgets.
func Actionable(sub *v1alpha1.Subscription, plan *v1alpha1.InstallPlan) bool {
	return len(BlamedCSVs(sub)) > 0 || len(Compare(sub, plan)) > 0
}
