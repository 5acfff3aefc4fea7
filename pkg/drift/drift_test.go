package drift

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

func plan(phase v1alpha1.InstallPlanPhase, conds ...v1alpha1.InstallPlanCondition) *v1alpha1.InstallPlan {
	return &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Name: "install-1", UID: "ip-uid"},
		Status: v1alpha1.InstallPlanStatus{Phase: phase, Conditions: conds}}
}

func installed(status corev1.ConditionStatus, reason string) v1alpha1.InstallPlanCondition {
	return v1alpha1.InstallPlanCondition{Type: v1alpha1.InstallPlanInstalled, Status: status, Reason: reason}
}

type conds = map[v1alpha1.SubscriptionConditionType]string

// The mapping of olm-facts.md §2.2, one row per transition OLM's e2e test walks.
func TestExpected(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plan  *v1alpha1.InstallPlan
		state v1alpha1.SubscriptionState
		want  Expectation
	}{
		{"none", plan(v1alpha1.InstallPlanPhaseNone), v1alpha1.SubscriptionStateUpgradePending,
			Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanPending: "InstallPlanNotYetReconciled"}}},
		{"planning", plan(v1alpha1.InstallPlanPhasePlanning), "", Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanPending: "Planning"}}},
		{"requires approval", plan(v1alpha1.InstallPlanPhaseRequiresApproval), v1alpha1.SubscriptionStateUpgradePending,
			Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanPending: "RequiresApproval"}}},
		{"installing", plan(v1alpha1.InstallPlanPhaseInstalling), "", Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanPending: "Installing"}}},
		{"failed without Installed", plan(v1alpha1.InstallPlanPhaseFailed), "", Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanFailed: "InstallPlanFailed"}}},
		{"failed with Installed=False", plan(v1alpha1.InstallPlanPhaseFailed, installed(corev1.ConditionFalse, "InstallComponentFailed")), "",
			Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanFailed: "InstallComponentFailed"}}},
		{"failed with Installed=True keeps the generic reason", plan(v1alpha1.InstallPlanPhaseFailed, installed(corev1.ConditionTrue, "Whatever")), "",
			Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanFailed: "InstallPlanFailed"}}},
		{"failed with an empty reason", plan(v1alpha1.InstallPlanPhaseFailed, installed(corev1.ConditionFalse, "")), "",
			Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanFailed: "InstallPlanFailed"}}},
		{"complete", plan(v1alpha1.InstallPlanPhaseComplete), v1alpha1.SubscriptionStateAtLatest, Expectation{Conditions: conds{}}},
		{"unknown phase", plan("Exploded"), "", Expectation{Conditions: conds{}}},
		{"missing", nil, v1alpha1.SubscriptionStateAtLatest, Expectation{Conditions: conds{v1alpha1.SubscriptionInstallPlanMissing: "ReferencedInstallPlanNotFound"}}},
		{"missing while UpgradePending re-resolves", nil, v1alpha1.SubscriptionStateUpgradePending, Expectation{Conditions: conds{}, Reresolve: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Expected(tc.plan, tc.state)); diff != "" {
				t.Errorf("Expected (-want +got):\n%s", diff)
			}
		})
	}
}

func sub(ref string, state v1alpha1.SubscriptionState, cs ...v1alpha1.SubscriptionCondition) *v1alpha1.Subscription {
	s := &v1alpha1.Subscription{Status: v1alpha1.SubscriptionStatus{State: state, Conditions: cs}}
	if ref != "" {
		s.Status.InstallPlanRef = &corev1.ObjectReference{Name: ref, UID: "ip-uid"}
	}
	return s
}

func cond(t v1alpha1.SubscriptionConditionType, reason string) v1alpha1.SubscriptionCondition {
	return v1alpha1.SubscriptionCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason}
}

func TestCompare(t *testing.T) {
	pending := v1alpha1.SubscriptionInstallPlanPending
	for _, tc := range []struct {
		name string
		sub  *v1alpha1.Subscription
		plan *v1alpha1.InstallPlan
		want []Difference
	}{
		{"no plan referenced", sub("", ""), nil, nil},
		{"in step", sub("install-1", v1alpha1.SubscriptionStateUpgradePending, cond(pending, "RequiresApproval")), plan(v1alpha1.InstallPlanPhaseRequiresApproval), nil},
		{"other conditions do not count", sub("install-1", v1alpha1.SubscriptionStateAtLatest,
			cond(v1alpha1.SubscriptionCatalogSourcesUnhealthy, "UnhealthyCatalogSourceFound")), plan(v1alpha1.InstallPlanPhaseComplete), nil},
		{"a False condition counts as absent", sub("install-1", v1alpha1.SubscriptionStateAtLatest,
			v1alpha1.SubscriptionCondition{Type: pending, Status: corev1.ConditionFalse, Reason: "Installing"}), plan(v1alpha1.InstallPlanPhaseComplete), nil},
		{"stale pending after completion (#3199: not notified)", sub("install-1", v1alpha1.SubscriptionStateAtLatest, cond(pending, "RequiresApproval")),
			plan(v1alpha1.InstallPlanPhaseComplete), []Difference{{Condition: "InstallPlanPending", Want: "absent", Got: "RequiresApproval"}}},
		{"stale reason", sub("install-1", "", cond(pending, "RequiresApproval")), plan(v1alpha1.InstallPlanPhaseInstalling),
			[]Difference{{Condition: "InstallPlanPending", Want: "Installing", Got: "RequiresApproval"}}},
		{"failure not shown", sub("install-1", "", cond(pending, "Installing")), plan(v1alpha1.InstallPlanPhaseFailed, installed(corev1.ConditionFalse, "InstallComponentFailed")),
			[]Difference{{Condition: "InstallPlanPending", Want: "absent", Got: "Installing"}, {Condition: "InstallPlanFailed", Want: "InstallComponentFailed", Got: "absent"}}},
		{"missing plan not shown", sub("install-1", v1alpha1.SubscriptionStateAtLatest), nil,
			[]Difference{{Condition: "InstallPlanMissing", Want: "ReferencedInstallPlanNotFound", Got: "absent"}}},
		{"missing plan shown", sub("install-1", v1alpha1.SubscriptionStateAtLatest, cond(v1alpha1.SubscriptionInstallPlanMissing, "ReferencedInstallPlanNotFound")), nil, nil},
		{"a plan of another name is not the referenced one", sub("install-1", v1alpha1.SubscriptionStateAtLatest),
			&v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Name: "install-2"}, Status: v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseComplete}},
			[]Difference{{Condition: "InstallPlanMissing", Want: "ReferencedInstallPlanNotFound", Got: "absent"}}},
		{"missing plan while UpgradePending: OLM should have re-resolved", sub("install-1", v1alpha1.SubscriptionStateUpgradePending), nil,
			[]Difference{{Condition: "installPlanRef", Want: "absent", Got: "install-1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Compare(tc.sub, tc.plan)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Compare (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSummary(t *testing.T) {
	got := Summary([]Difference{{"InstallPlanPending", "absent", "Installing"}, {"InstallPlanFailed", "InstallComponentFailed", "absent"}})
	want := "InstallPlanFailed: want InstallComponentFailed, got absent; InstallPlanPending: want absent, got Installing"
	if got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
}
