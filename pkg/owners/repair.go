package owners

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Repair adds every missing Subscription ownerReference to a plan whose status OLM has populated,
// with a patch that fails if the plan changed since it was read. It reports whether it patched.
// The repair and drift reconcilers both call it: a stale Subscription can be the F1 failure's
// consequence.
func Repair(ctx context.Context, c client.Client, rec events.EventRecorder, ip *v1alpha1.InstallPlan) (bool, error) {
	// Never between OLM's Create and its first status write: a write there makes OLM's
	// UpdateStatus conflict and leaves an orphan plan. The status write triggers us again.
	if ip.DeletionTimestamp != nil || !ip.Status.Populated() {
		return false, nil
	}
	subs := &v1alpha1.SubscriptionList{}
	if err := c.List(ctx, subs, client.InNamespace(ip.Namespace)); err != nil {
		return false, err
	}
	want := InstallPlanOwners(Update, ip.Name, ip.UID, ip.OwnerReferences, FromSubscriptions(subs.Items))
	ops := OwnerReferencesPatch(ip.OwnerReferences, want)
	if len(ops) == 0 {
		return false, nil
	}
	// The test makes the patch atomic: if OLM wrote in between, it fails and we retry on fresh data.
	ops = append([]jsonpatch.Operation{jsonpatch.NewOperation("test", "/metadata/resourceVersion", ip.ResourceVersion)}, ops...)
	body, err := json.Marshal(ops)
	if err != nil {
		return false, err
	}
	if err := c.Patch(ctx, ip, client.RawPatch(types.JSONPatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("patching InstallPlan %s/%s: %w", ip.Namespace, ip.Name, err)
	}
	metrics.InstallPlanRepairs.Inc()
	names := make([]string, 0, len(want))
	for _, o := range want {
		names = append(names, o.Name)
	}
	rec.Eventf(ip, nil, corev1.EventTypeNormal, "OwnerReferencesRepaired", "Repair",
		"Subscriptions %s now own this InstallPlan (OLM issue #3199)", strings.Join(names, ", "))
	ctrl.LoggerFrom(ctx).Info("repaired InstallPlan ownerReferences", "installPlan", ip.Namespace+"/"+ip.Name, "subscriptions", names)
	return true, nil
}
