package validate

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/review"
)

// Approval is the part of an InstallPlan an approval decision reads.
type Approval struct {
	// Plan is the InstallPlan's name; Owners its ownerReferences (the Subscriptions it was
	// resolved for: OLM sets them, and olmguard's webhook adds those OLM's race leaves out).
	Plan   string
	Owners []metav1.OwnerReference
	// CSVs is spec.clusterServiceVersionNames: the CSVs approving the plan installs.
	CSVs []string
	// Generation is spec.generation: OLM numbers a namespace's plans in the order it makes them.
	Generation int
}

// ApprovalPolicies checks the approval of an InstallPlan (spec.approved turned true) against the
// live Subscriptions of its namespace:
//   - stale-approval: a Subscription the plan was resolved for has moved on to a newer plan
//     (status.installPlanRef names another one, of a higher status.installPlanGeneration): the
//     approved plan installs what is no longer current, and the newer plan still waits. A
//     Subscription pointing at an older plan is no sign: OLM v0.46 leaves a Manual Subscription at
//     its own pending plan when a later plan of the namespace (the mixed one below) covers it too.
//   - unrequested-upgrade: the plan installs the next CSV of Automatic Subscriptions and also
//     upgrades a Manual one. OLM resolves a namespace as a whole, and in a namespace mixing approvals it
//     makes every plan Manual, one plan covering the namespace's Subscriptions (olm-facts.md §1.1
//     step 7; OLM #1859, #2325): whoever approves the plan for the Automatic operators
//     upgrades the Manual one too, which nobody asked for.
func ApprovalPolicies(p Policies, a Approval, subs []v1alpha1.Subscription) []Violation {
	if p.Approval == Off {
		return nil
	}
	var stale, automatic, upgraded []string
	for i := range subs {
		s := &subs[i]
		if s.DeletionTimestamp != nil || !owners.NamesSubscription(a.Owners, s.Name, s.UID) {
			continue
		}
		if ref := s.Status.InstallPlanRef; ref != nil && ref.Name != "" && ref.Name != a.Plan && s.Status.InstallPlanGeneration > a.Generation {
			stale = append(stale, fmt.Sprintf("%s (its newest plan is %s)", s.Name, ref.Name))
		}
		if approvalOf(s) != v1alpha1.ApprovalManual {
			// OLM owns every plan by every Subscription of the namespace: an Automatic one counts
			// only when the plan installs its next CSV, else a Manual operator's own upgrade plan
			// would be taken for a mixed one.
			if cur := s.Status.CurrentCSV; cur != "" && cur != s.Status.InstalledCSV && slices.Contains(a.CSVs, cur) {
				automatic = append(automatic, fmt.Sprintf("%s (Automatic Subscription %s)", cur, s.Name))
			}
			continue
		}
		if cur, inst := s.Status.CurrentCSV, s.Status.InstalledCSV; inst != "" && cur != inst && slices.Contains(a.CSVs, cur) {
			upgraded = append(upgraded, fmt.Sprintf("%s from %s to %s", s.Name, inst, cur))
		}
	}
	var out []Violation
	if len(stale) > 0 {
		out = append(out, Violation{Policy: "stale-approval", Mode: p.Approval, Message: fmt.Sprintf(
			"InstallPlan %s is not the newest plan of Subscription %s: approve that one instead",
			a.Plan, strings.Join(stale, ", "))})
	}
	if len(automatic) > 0 && len(upgraded) > 0 {
		out = append(out, Violation{Policy: "unrequested-upgrade", Mode: p.Approval, Message: fmt.Sprintf(
			"InstallPlan %s installs %s and also upgrades Subscription %s, whose approval is Manual: approve it only if that upgrade is wanted",
			a.Plan, strings.Join(automatic, ", "), strings.Join(upgraded, ", "))})
	}
	return out
}

// planSpec is the part of an InstallPlan's spec the approval guard reads.
type planSpec struct {
	Approved   bool     `json:"approved"`
	CSVs       []string `json:"clusterServiceVersionNames"`
	Generation int      `json:"generation"`
}

// readPlanSpec decodes only spec from an InstallPlan's body (its status can hold every manifest
// of the bundles, which no check here reads).
func readPlanSpec(raw []byte) (planSpec, error) {
	var s planSpec
	f, err := review.Fields(raw, "spec")
	if err != nil || f["spec"] == nil {
		return s, err
	}
	return s, review.Decode(f["spec"], &s)
}
