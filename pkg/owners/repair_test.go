package owners

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// The repair's decision, without the cluster: when a plan may be patched, and with what.
func TestRepair(t *testing.T) {
	now := metav1.Now()
	populated := v1alpha1.InstallPlanStatus{Plan: []*v1alpha1.Step{{}}}
	plan := func(status v1alpha1.InstallPlanStatus, deleting *metav1.Time, refs ...metav1.OwnerReference) *v1alpha1.InstallPlan {
		return &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "install-1", UID: "uid-plan",
			DeletionTimestamp: deleting, OwnerReferences: refs}, Status: status}
	}
	sub := func(name, planRef string) v1alpha1.Subscription {
		s := v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
		if planRef != "" {
			s.Status.InstallPlanRef = &corev1.ObjectReference{Namespace: "ns", Name: planRef}
		}
		return s
	}
	for _, tc := range []struct {
		name           string
		plan           *v1alpha1.InstallPlan
		subs           []v1alpha1.Subscription
		wantRepairable bool
		wantOwners     []string
		wantOps        int
	}{
		{name: "before OLM's first status write: not yet", plan: plan(v1alpha1.InstallPlanStatus{}, nil)},
		{name: "being deleted: never", plan: plan(populated, &now)},
		{name: "populated, an owner missing: appended", plan: plan(populated, nil),
			subs: []v1alpha1.Subscription{sub("a", "install-1"), sub("b", "install-2")}, wantRepairable: true, wantOwners: []string{"a"}, wantOps: 1},
		{name: "populated, owners complete: nothing", plan: plan(populated, nil, SubscriptionOwnerRef("a", "uid-a")),
			subs: []v1alpha1.Subscription{sub("a", "install-1")}, wantRepairable: true, wantOwners: []string{"a"}},
		{name: "populated, an owner of a stale UID: its UID set", plan: plan(populated, nil, SubscriptionOwnerRef("a", "uid-old")),
			subs: []v1alpha1.Subscription{sub("a", "install-2")}, wantRepairable: true, wantOwners: []string{"a"}, wantOps: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// NeedsRepair, which keeps the controller's first pass to the plans to patch, says
			// exactly when RepairPatch patches.
			ptrs := make([]*v1alpha1.Subscription, len(tc.subs))
			for i := range tc.subs {
				ptrs[i] = &tc.subs[i]
			}
			if got := NeedsRepair(tc.plan, ptrs); got != (tc.wantOps > 0) {
				t.Errorf("NeedsRepair = %v, want %v", got, tc.wantOps > 0)
			}
			if got := Repairable(tc.plan); got != tc.wantRepairable {
				t.Fatalf("Repairable = %v, want %v", got, tc.wantRepairable)
			}
			if !tc.wantRepairable {
				return
			}
			ops, want := RepairPatch(tc.plan, tc.subs)
			if len(ops) != tc.wantOps || !slices.Equal(names(want), tc.wantOwners) {
				t.Errorf("RepairPatch = %d operations for owners %v, want %d for %v", len(ops), names(want), tc.wantOps, tc.wantOwners)
			}
		})
	}
}
