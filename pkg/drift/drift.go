// Package drift holds the mapping OLM applies from an InstallPlan to the Subscription conditions
// that reference it (olm-facts.md §2.2, OLM's subscription state.go), and the comparison that
// tells when a Subscription disagrees with its plan (F2). The mapping and the comparison are pure;
// the controller, `kubectl olmguard doctor` and the tests share them and PlanKey. The package does
// no I/O: the consumers read the plan and send the nudge (pkg/write.Nudge).
package drift

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// PlanTypes are the Subscription conditions OLM derives from the referenced InstallPlan.
var PlanTypes = []v1alpha1.SubscriptionConditionType{
	v1alpha1.SubscriptionInstallPlanPending,
	v1alpha1.SubscriptionInstallPlanFailed,
	v1alpha1.SubscriptionInstallPlanMissing,
}

// Expectation is what OLM should show on a Subscription, given its plan.
type Expectation struct {
	// Conditions maps each PlanTypes condition that must be True to its reason. A type absent
	// from the map must be absent (or not True).
	Conditions map[v1alpha1.SubscriptionConditionType]string
	// Reresolve is true when OLM clears status.installPlanRef instead of setting a condition: the
	// plan is gone while the Subscription is UpgradePending, so OLM resolves it again.
	Reresolve bool
}

// Expected returns the conditions OLM sets for a Subscription whose status.installPlanRef names
// plan; plan is nil when that plan does not exist.
func Expected(plan *v1alpha1.InstallPlan, state v1alpha1.SubscriptionState) Expectation {
	e := Expectation{Conditions: map[v1alpha1.SubscriptionConditionType]string{}}
	if plan == nil {
		if state == v1alpha1.SubscriptionStateUpgradePending {
			e.Reresolve = true
		} else {
			e.Conditions[v1alpha1.SubscriptionInstallPlanMissing] = v1alpha1.ReasonReferencedInstallPlanNotFound
		}
		return e
	}
	switch phase := plan.Status.Phase; phase {
	case v1alpha1.InstallPlanPhaseNone:
		e.Conditions[v1alpha1.SubscriptionInstallPlanPending] = v1alpha1.ReasonInstallPlanNotYetReconciled
	case v1alpha1.InstallPlanPhasePlanning, v1alpha1.InstallPlanPhaseRequiresApproval, v1alpha1.InstallPlanPhaseInstalling:
		e.Conditions[v1alpha1.SubscriptionInstallPlanPending] = string(phase)
	case v1alpha1.InstallPlanPhaseFailed:
		e.Conditions[v1alpha1.SubscriptionInstallPlanFailed] = FailedReason(plan.Status)
	}
	// Complete, and any phase OLM does not know, leave the three conditions removed.
	return e
}

// FailedReason is the reason of InstallPlanFailed: the plan's Installed condition reason when that
// condition is False (InstallComponentFailed, InstallCheckFailed), else InstallPlanFailed.
func FailedReason(st v1alpha1.InstallPlanStatus) string {
	for _, c := range st.Conditions {
		if c.Type == v1alpha1.InstallPlanInstalled && c.Status == corev1.ConditionFalse && c.Reason != "" {
			return c.Reason
		}
	}
	return v1alpha1.ReasonInstallPlanFailed
}

// Difference is one way a Subscription disagrees with its plan.
type Difference struct {
	// Condition is the condition type, or "installPlanRef" for a reference OLM should have cleared.
	Condition string `json:"condition"`
	// Want and Got are "<reason>" for a True condition, "absent" otherwise.
	Want string `json:"want"`
	Got  string `json:"got"`
}

func (d Difference) String() string {
	return fmt.Sprintf("%s: want %s, got %s", d.Condition, d.Want, d.Got)
}

const absent = "absent"

// Compare returns how a Subscription disagrees with the plan its status.installPlanRef names
// (plan nil: not found), in PlanTypes order. A Subscription without a plan reference has nothing
// to disagree with. Only type, status and reason count: messages and times are OLM's to change.
func Compare(sub *v1alpha1.Subscription, plan *v1alpha1.InstallPlan) []Difference {
	ref := sub.Status.InstallPlanRef
	if ref == nil || ref.Name == "" {
		return nil
	}
	if plan != nil && plan.Name != ref.Name {
		plan = nil // OLM looks the plan up by name only
	}
	want := Expected(plan, sub.Status.State)
	if want.Reresolve {
		return []Difference{{Condition: "installPlanRef", Want: absent, Got: ref.Name}}
	}
	var out []Difference
	for _, t := range PlanTypes {
		w, ok := want.Conditions[t]
		if !ok {
			w = absent
		}
		g := absent
		if c := sub.Status.GetCondition(t); c != nil && c.Status == corev1.ConditionTrue {
			g = c.Reason
		}
		if g != w {
			out = append(out, Difference{Condition: string(t), Want: w, Got: g})
		}
	}
	return out
}

// Summary joins differences into one line, e.g. for an Event message.
func Summary(diffs []Difference) string {
	s := make([]string, len(diffs))
	for i, d := range diffs {
		s[i] = d.String()
	}
	sort.Strings(s)
	return strings.Join(s, "; ")
}
