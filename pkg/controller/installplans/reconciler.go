// Package installplans repairs InstallPlans written while olmguard's webhook was away (down, its
// failurePolicy Ignore let the write through, or the plan predates olmguard): every Subscription
// whose status.installPlanRef names a plan must own it (F1, OLM issue #3199).
package installplans

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
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/mutate"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Name of the reconciler, its Events' reporting controller and its field manager.
const Name = "installplan-owners"

// Reconciler adds missing Subscription ownerReferences to InstallPlans.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// Setup registers the reconciler with the controller manager.
func Setup() controller.Setup {
	return controller.Setup{Name: Name, Add: func(mgr manager.Manager, _ controller.Options) error {
		r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name)}
		return r.SetupWithManager(mgr)
	}}
}

// SetupWithManager watches InstallPlans, and Subscriptions mapped to the plan they reference.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.InstallPlan{}).
		Watches(&v1alpha1.Subscription{}, handler.EnqueueRequestsFromMapFunc(planOfSubscription)).
		Complete(r)
}

func planOfSubscription(_ context.Context, o client.Object) []reconcile.Request {
	sub, ok := o.(*v1alpha1.Subscription)
	if !ok || sub.Status.InstallPlanRef == nil || sub.Status.InstallPlanRef.Name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: sub.Namespace, Name: sub.Status.InstallPlanRef.Name}}}
}

// Reconcile patches one plan if a Subscription that references it is missing from its owners.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ip := &v1alpha1.InstallPlan{}
	if err := r.Client.Get(ctx, req.NamespacedName, ip); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	_, err := Repair(ctx, r.Client, r.Recorder, ip)
	return reconcile.Result{}, err
}

// Repair adds every missing Subscription ownerReference to a plan whose status OLM has populated,
// with a patch that fails if the plan changed since it was read. It reports whether it patched.
// The drift reconciler calls it too, when a stale Subscription is the F1 failure's consequence.
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
	owners := mutate.InstallPlanOwners(mutate.Update, ip.Name, ip.UID, ip.OwnerReferences, mutate.FromSubscriptions(subs.Items))
	ops := mutate.OwnerReferencesPatch(ip.OwnerReferences, owners)
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
	names := make([]string, 0, len(owners))
	for _, o := range owners {
		names = append(names, o.Name)
	}
	rec.Eventf(ip, nil, corev1.EventTypeNormal, "OwnerReferencesRepaired", "Repair",
		"Subscriptions %s now own this InstallPlan (OLM issue #3199)", strings.Join(names, ", "))
	ctrl.LoggerFrom(ctx).Info("repaired InstallPlan ownerReferences", "installPlan", ip.Namespace+"/"+ip.Name, "subscriptions", names)
	return true, nil
}
