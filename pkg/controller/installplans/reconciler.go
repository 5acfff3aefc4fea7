// Package installplans repairs InstallPlans written while olmguard's webhook was away (down, its
// failurePolicy Ignore let the write through, or the plan predates olmguard): every Subscription
// whose status.installPlanRef names a plan must own it (F1, OLM issue #3199).
package installplans

import (
	"context"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/cachepeek"
	"github.com/olmguard/olmguard/internal/firstlist"
	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/write"
)

// Name of the reconciler, its Events' reporting controller and its field manager.
const Name = "installplan-owners"

// Reconciler adds missing Subscription ownerReferences to InstallPlans.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// CacheNeeds is what the reconciler reads through the manager's cache: the typed views of
// InstallPlans (without steps) and Subscriptions, no label or annotation.
func CacheNeeds() cacheneeds.Needs {
	return cacheneeds.Needs{
		{Object: &v1alpha1.InstallPlan{}, Fields: cacheneeds.InstallPlanView},
		{Object: &v1alpha1.Subscription{}, Fields: cacheneeds.SubscriptionView},
	}
}

// Add builds the reconciler and registers it with mgr. It has no settings.
func Add(mgr manager.Manager) error {
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name)}
	return r.SetupWithManager(mgr)
}

// SetupWithManager watches InstallPlans, and Subscriptions mapped to the plan they reference. Of
// the initial list (each start and each leadership), only the plans the repair would patch enter
// the queue (firstlist): the plan's check reads every Subscription of its namespace, so the
// Subscriptions' own initial events add nothing.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	informers := mgr.GetCache()
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.InstallPlan{}, builder.WithPredicates(firstlist.Unless(func(ctx context.Context, ip *v1alpha1.InstallPlan) (bool, error) {
			subs, err := cachepeek.List[v1alpha1.Subscription](ctx, informers, ip.Namespace)
			return err == nil && owners.NeedsRepair(ip, subs), err
		}))).
		Watches(&v1alpha1.Subscription{}, handler.EnqueueRequestsFromMapFunc(planOfSubscription), builder.WithPredicates(firstlist.Skip())).
		Complete(r)
}

// planOfSubscription maps a Subscription to the plan its status.installPlanRef names (drift.PlanKey).
func planOfSubscription(_ context.Context, o client.Object) []reconcile.Request {
	sub, ok := o.(*v1alpha1.Subscription)
	if !ok {
		return nil
	}
	key, ok := drift.PlanKey(sub)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: key}}
}

// Reconcile patches one plan if a Subscription that references it is missing from its owners.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	ip := &v1alpha1.InstallPlan{}
	if err := r.Client.Get(ctx, req.NamespacedName, ip); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ip.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // the garbage collector's; nothing to repair
	}
	return reconcile.Result{}, r.reconcileNormal(ctx, ip)
}

// reconcileNormal adds the owners pkg/owners says the plan misses (write.RepairOwners).
func (r *Reconciler) reconcileNormal(ctx context.Context, ip *v1alpha1.InstallPlan) error {
	_, err := write.RepairOwners(ctx, r.Client, r.Recorder, ip)
	return err
}
