package owners

import (
	"gomodules.xyz/jsonpatch/v2"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Repairable reports whether a plan written without its owners may be repaired now: never while
// it is being deleted, and never between OLM's Create and its first status write, where a write
// makes OLM's UpdateStatus conflict and leaves an orphan plan (the status write triggers the
// repair again).
func Repairable(ip *v1alpha1.InstallPlan) bool {
	return ip.DeletionTimestamp == nil && ip.Status.Populated()
}

// RepairPatch returns the Subscriptions among subs (the plan's namespace's) that must own the
// plan, and the append-only patch that adds those it misses: no operations when it misses none.
// The repair and drift reconcilers both apply it (pkg/write.RepairOwners, with a guard on the
// plan's resourceVersion): a stale Subscription can be the F1 failure's consequence.
func RepairPatch(ip *v1alpha1.InstallPlan, subs []v1alpha1.Subscription) ([]jsonpatch.Operation, []Subscription) {
	return repairPatch(ip, FromSubscriptions(subs))
}

func repairPatch(ip *v1alpha1.InstallPlan, subs []Subscription) ([]jsonpatch.Operation, []Subscription) {
	want := InstallPlanOwners(Update, ip.Name, ip.UID, ip.OwnerReferences, subs)
	return OwnerReferencesPatch(ip.OwnerReferences, want), want
}

// NeedsRepair reports whether the repair would patch the plan now (Repairable, and RepairPatch
// has operations), subs being its namespace's Subscriptions as the controller's cache holds them.
func NeedsRepair(ip *v1alpha1.InstallPlan, subs []*v1alpha1.Subscription) bool {
	if !Repairable(ip) {
		return false
	}
	views := make([]Subscription, 0, len(subs))
	for _, s := range subs {
		views = append(views, FromSubscription(s))
	}
	ops, _ := repairPatch(ip, views)
	return len(ops) > 0
}
