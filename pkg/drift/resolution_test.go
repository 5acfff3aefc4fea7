package drift

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

func TestStaleResolution(t *testing.T) {
	// The message OLM v0.46.0 wrote in the real-OLM tier while v1 was being replaced by v2.
	const upgrade = "constraints not satisfiable: @existing/ns//alpha.v1.0.0, @existing/ns//alpha.v2.0.0 "
	sub := func(status corev1.ConditionStatus, reason, msg string) *v1alpha1.Subscription {
		s := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "alpha"}}
		s.Status.Conditions = []v1alpha1.SubscriptionCondition{{Type: v1alpha1.SubscriptionResolutionFailed, Status: status, Reason: reason, Message: msg}}
		return s
	}
	only := func(names ...string) func(string) bool {
		return func(n string) bool { return slices.Contains(names, n) }
	}
	for _, tt := range []struct {
		name   string
		sub    *v1alpha1.Subscription
		exists func(string) bool
		want   []string
	}{
		{"the replaced CSV is gone", sub(corev1.ConditionTrue, ReasonConstraintsNotSatisfiable, upgrade), only("alpha.v2.0.0"), []string{"alpha.v1.0.0"}},
		{"both still there: a real conflict", sub(corev1.ConditionTrue, ReasonConstraintsNotSatisfiable, upgrade), only("alpha.v1.0.0", "alpha.v2.0.0"), nil},
		{"both gone", sub(corev1.ConditionTrue, ReasonConstraintsNotSatisfiable, upgrade), only(), []string{"alpha.v1.0.0", "alpha.v2.0.0"}},
		{"condition False", sub(corev1.ConditionFalse, ReasonConstraintsNotSatisfiable, upgrade), only(), nil},
		{"OLM retries this reason itself", sub(corev1.ConditionTrue, "ErrorPreventedResolution", upgrade), only(), nil},
		{"another namespace's CSV is not this namespace's", sub(corev1.ConditionTrue, ReasonConstraintsNotSatisfiable, "constraints not satisfiable: @existing/other//alpha.v1.0.0"), only(), nil},
		{"no installed CSV named", sub(corev1.ConditionTrue, ReasonConstraintsNotSatisfiable, "constraints not satisfiable: no operators found in package alpha"), only(), nil},
		{"named twice, reported once", sub(corev1.ConditionTrue, ReasonConstraintsNotSatisfiable, "@existing/ns//a.v1 requires x, @existing/ns//a.v1 and y"), only(), []string{"a.v1"}},
		{"no condition", &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}}, only(), nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := StaleResolution(tt.sub, tt.exists); !slices.Equal(got, tt.want) {
				t.Errorf("StaleResolution = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLastNudge(t *testing.T) {
	now := time.Date(2026, 11, 25, 2, 15, 28, 123456789, time.UTC)
	s := &v1alpha1.Subscription{}
	if !LastNudge(s).IsZero() {
		t.Error("a Subscription never nudged has a last nudge")
	}
	var patch struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(NudgePatch(now), &patch); err != nil {
		t.Fatal(err)
	}
	s.Annotations = patch.Metadata.Annotations
	if got := LastNudge(s); !got.Equal(now) {
		t.Errorf("LastNudge = %s, want %s", got, now)
	}
	s.Annotations[olmguard.ResyncAnnotation] = "by hand"
	if !LastNudge(s).IsZero() {
		t.Error("an annotation that is not a time reads as a nudge")
	}
}

// Actionable, which keeps the controller's first pass to the Subscriptions the drift reconciler
// acts on: a disagreement with the plan, or a resolution failure blaming installed CSVs.
func TestActionable(t *testing.T) {
	ref := &corev1.ObjectReference{Namespace: "ns", Name: "install-1"}
	complete := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "install-1"}, Status: v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseComplete}}
	installing := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "install-1"}, Status: v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseInstalling}}
	sub := func(ref *corev1.ObjectReference, conds ...v1alpha1.SubscriptionCondition) *v1alpha1.Subscription {
		s := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "alpha"}}
		s.Status.InstallPlanRef, s.Status.Conditions = ref, conds
		return s
	}
	blamed := v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionResolutionFailed, Status: corev1.ConditionTrue,
		Reason: ReasonConstraintsNotSatisfiable, Message: "constraints not satisfiable: @existing/ns//alpha.v1.0.0"}
	for _, tt := range []struct {
		name string
		sub  *v1alpha1.Subscription
		plan *v1alpha1.InstallPlan
		want bool
	}{
		{"no plan referenced, nothing blamed", sub(nil), nil, false},
		{"agrees with its Complete plan", sub(ref), complete, false},
		{"its plan Installing, no Pending condition", sub(ref), installing, true},
		{"its plan gone", sub(ref), nil, true},
		{"its resolution blames an installed CSV", sub(nil, blamed), nil, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Actionable(tt.sub, tt.plan); got != tt.want {
				t.Errorf("Actionable = %v, want %v", got, tt.want)
			}
		})
	}
}
