package write

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
)

// EventOwnersRepaired is the reason of the Event on a plan RepairOwners patched.
const EventOwnersRepaired = "OwnerReferencesRepaired"

// RepairOwners adds every missing Subscription ownerReference to a plan whose status OLM has
// populated (owners.Repairable, owners.RepairPatch), with a patch that fails if the plan changed
// since it was read, then counts it and records an Event on the plan. It reports whether it
// patched. The installplan-owners and subscription-drift reconcilers both call it: a stale
// Subscription can be the F1 failure's consequence.
func RepairOwners(ctx context.Context, c client.Client, rec events.EventRecorder, ip *v1alpha1.InstallPlan) (bool, error) {
	if !owners.Repairable(ip) {
		return false, nil
	}
	subs := &v1alpha1.SubscriptionList{}
	if err := c.List(ctx, subs, client.InNamespace(ip.Namespace)); err != nil {
		return false, err
	}
	ops, want := owners.RepairPatch(ip, subs.Items)
	// The guard makes the patch atomic: if OLM wrote in between, it fails and we retry on fresh data.
	patched, err := GuardedJSONPatch(ctx, c, ip, ops)
	if err != nil {
		return false, fmt.Errorf("patching InstallPlan %s/%s: %w", ip.Namespace, ip.Name, err)
	}
	if !patched {
		return false, nil
	}
	metrics.InstallPlanRepairs.Inc()
	names := make([]string, 0, len(want))
	for _, o := range want {
		names = append(names, o.Name)
	}
	rec.Eventf(ip, nil, corev1.EventTypeNormal, EventOwnersRepaired, "Repair",
		"Subscriptions %s now own this InstallPlan (OLM issue #3199)", strings.Join(names, ", "))
	ctrl.LoggerFrom(ctx).Info("repaired InstallPlan ownerReferences", "installPlan", ip.Namespace+"/"+ip.Name, "subscriptions", names)
	return true, nil
}
