// Package subscriptiondrift reports Subscriptions whose InstallPlan conditions disagree with their
// plan (F2, olm-facts.md §2) and nudges OLM to re-reconcile them. It never writes OLM's status: the
// nudge is an annotation change, which is a Subscription event for OLM's subscription syncer.
package subscriptiondrift

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/write"
)

// Name of the reconciler, its Events' reporting controller and its field manager.
const Name = "subscription-drift"

// Event reasons.
const (
	ReasonDrift         = "SubscriptionDrift"
	ReasonDriftResolved = "SubscriptionDriftResolved"
	// ReasonStaleResolution: OLM's resolution failed on installed CSVs that are gone since.
	ReasonStaleResolution = "StaleResolutionFailure"
)

// Reconciler watches Subscriptions and the plans they reference.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Window   time.Duration
	Now      func() time.Time

	mu       sync.Mutex
	episodes map[types.NamespacedName]Episode
}

// Options are the reconciler's settings.
type Options struct {
	// Window is how long a Subscription may disagree with its InstallPlan before it is reported
	// and nudged.
	Window time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options { return Options{Window: 30 * time.Second} }

var windowFlag = flags.Duration{Name: "drift-window", Least: time.Second,
	Usage: "how long a Subscription may disagree with its InstallPlan before the drift is reported"}

// BindFlags registers the options' flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) { windowFlag.Bind(fs, &o.Window) }

// Validate reports the first invalid option.
func (o Options) Validate() error { return windowFlag.Check(o.Window) }

// CacheNeeds is what the reconciler reads through the manager's cache: Subscriptions (their typed
// view and olmguard's resync annotation, drift.LastNudge), InstallPlans (their typed view without steps), and
// whether a CSV of a name exists (drift.StaleResolution): CSVs as metadata, no label or
// annotation, OLM's copies left out as OLM's resolver leaves them out (the selections of
// cacheneeds.NotOLMCopies and TrackedCopies, which csv-cleanup declares too).
func CacheNeeds() cacheneeds.Needs {
	return cacheneeds.Needs{
		{Object: &v1alpha1.Subscription{}, Annotations: []string{olmguard.ResyncAnnotation}, Fields: cacheneeds.SubscriptionView},
		{Object: &v1alpha1.InstallPlan{}, Fields: cacheneeds.InstallPlanView},
		{Object: &v1alpha1.ClusterServiceVersion{}, Label: cacheneeds.NotOLMCopies, Also: cacheneeds.TrackedCopies},
	}
}

// Add builds the reconciler with o and registers it with mgr.
func Add(mgr manager.Manager, o Options) error {
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name), Window: o.Window, Now: time.Now}
	return r.SetupWithManager(mgr)
}

// SetupWithManager watches Subscriptions, and InstallPlans mapped to the Subscriptions whose
// installPlanRef names them: not to the plan's owners, since a missing owner is one cause of drift.
// Of the initial list (each start and each leadership), only the Subscriptions there is something
// to look at in (drift.Actionable, with their plan from the cache) enter the queue (firstlist):
// the plans' and CSVs' own initial events add nothing to that. The mappings read the cache's
// objects themselves (cachepeek): a List copies every Subscription of the namespace, for each
// plan's event.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	informers := mgr.GetCache()
	subscriptionsWhere := func(ctx context.Context, namespace string, match func(*v1alpha1.Subscription) bool) []reconcile.Request {
		subs, err := cachepeek.List[v1alpha1.Subscription](ctx, informers, namespace)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "reading the cached Subscriptions", "namespace", namespace)
			return nil
		}
		var out []reconcile.Request
		for _, s := range subs {
			if match(s) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
			}
		}
		return out
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.Subscription{}, builder.WithPredicates(firstlist.Unless(func(ctx context.Context, sub *v1alpha1.Subscription) (bool, error) {
			var plan *v1alpha1.InstallPlan
			if key, ok := drift.PlanKey(sub); ok {
				var err error
				if plan, err = cachepeek.Get[v1alpha1.InstallPlan](ctx, informers, key); err != nil {
					return true, err
				}
			}
			return drift.Actionable(sub, plan), nil
		}))).
		Watches(&v1alpha1.InstallPlan{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return subscriptionsWhere(ctx, o.GetNamespace(), func(s *v1alpha1.Subscription) bool {
				key, ok := drift.PlanKey(s)
				return ok && key.Name == o.GetName()
			})
		}), builder.WithPredicates(firstlist.Skip())).
		// A CSV's deletion may be what an unsatisfiable resolution waits for (drift.StaleResolution).
		Watches(&v1alpha1.ClusterServiceVersion{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return subscriptionsWhere(ctx, o.GetNamespace(), func(s *v1alpha1.Subscription) bool {
				return slices.Contains(drift.BlamedCSVs(s), o.GetName())
			})
		}), builder.WithPredicates(firstlist.Skip())).
		Complete(r)
}

// Reconcile compares one Subscription with its plan and acts on a drift that outlived the window.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	sub := &v1alpha1.Subscription{}
	if err := r.Client.Get(ctx, req.NamespacedName, sub); err != nil {
		r.forget(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if sub.DeletionTimestamp != nil {
		r.reconcileDelete(sub)
		return reconcile.Result{}, nil
	}
	return r.reconcileNormal(ctx, sub)
}

// reconcileDelete forgets a Subscription being deleted, closing its drift if one was reported.
func (r *Reconciler) reconcileDelete(sub *v1alpha1.Subscription) {
	r.resolve(sub)
}

// resolve forgets the Subscription's drift and says so if it had been reported.
func (r *Reconciler) resolve(sub *v1alpha1.Subscription) {
	if prev := r.forget(client.ObjectKeyFromObject(sub)); prev.Reported {
		r.Recorder.Eventf(sub, nil, corev1.EventTypeNormal, ReasonDriftResolved, "Resolve",
			"Subscription conditions agree with the InstallPlan again")
	}
}

// reconcileNormal unsticks a stale resolution failure and handles a drift from the plan.
func (r *Reconciler) reconcileNormal(ctx context.Context, sub *v1alpha1.Subscription) (reconcile.Result, error) {
	stuck, err := r.unstickResolution(ctx, sub)
	if err != nil {
		return reconcile.Result{}, err
	}
	res, err := r.reconcileDrift(ctx, sub)
	if stuck > 0 && (res.RequeueAfter == 0 || stuck < res.RequeueAfter) {
		res.RequeueAfter = stuck
	}
	return res, err
}

// unstickResolution nudges OLM when the Subscription's unsatisfiable resolution blames installed
// CSVs that are gone: OLM does not retry that failure by itself (drift.StaleResolution). While it
// lasts, it nudges at most once per Window; it returns when to look again (0: nothing to watch).
func (r *Reconciler) unstickResolution(ctx context.Context, sub *v1alpha1.Subscription) (time.Duration, error) {
	gone := drift.StaleResolution(sub, func(name string) bool {
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: sub.Namespace, Name: name}, &v1alpha1.ClusterServiceVersion{})
		return !apierrors.IsNotFound(err) // in doubt, the CSV is there: no nudge
	})
	if len(gone) == 0 {
		return 0, nil
	}
	now := r.Now()
	if since := now.Sub(drift.LastNudge(sub)); since < r.Window {
		return r.Window - since, nil
	}
	if err := r.nudge(ctx, sub, now); err != nil {
		return 0, err
	}
	r.Recorder.Eventf(sub, nil, corev1.EventTypeWarning, ReasonStaleResolution, "Nudge",
		"OLM's resolution failed on installed CSVs that are gone since (%s) and OLM does not retry it: asked OLM to resolve again (annotation %s)",
		printable.Line(strings.Join(gone, ", ")), olmguard.ResyncAnnotation) // names read from OLM's message
	ctrl.LoggerFrom(ctx).Info("nudged OLM to resolve again: its failure blames CSVs that are gone", "csvs", gone)
	return r.Window, nil
}

// reconcileDrift compares the Subscription with its plan and reports and nudges a drift that
// outlives the window.
func (r *Reconciler) reconcileDrift(ctx context.Context, sub *v1alpha1.Subscription) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(sub)
	plan, err := r.referencedPlan(ctx, sub)
	if err != nil {
		return reconcile.Result{}, err
	}
	diffs := drift.Compare(sub, plan)
	if len(diffs) == 0 {
		r.resolve(sub)
		return reconcile.Result{}, nil
	}

	now := r.Now()
	r.mu.Lock()
	if r.episodes == nil {
		r.episodes = map[types.NamespacedName]Episode{}
	}
	episode, action, after := Next(r.episodes[key], drift.Summary(diffs), now, r.Window)
	r.episodes[key] = episode
	r.updateGauge()
	r.mu.Unlock()

	switch action {
	case Report:
		for _, d := range diffs {
			metrics.SubscriptionDrifts.WithLabelValues(d.Condition).Inc()
		}
		repaired, err := r.repairOwner(ctx, sub, plan)
		if err != nil {
			return reconcile.Result{}, err
		}
		msg := fmt.Sprintf("conditions disagree with %s for %s: %s; asked OLM to re-reconcile (annotation %s)",
			describe(sub, plan), now.Sub(episode.Since).Round(time.Second), drift.Summary(diffs), olmguard.ResyncAnnotation)
		if repaired {
			msg += "; the plan lacked this Subscription's ownerReference, so OLM never notified it (OLM issue #3199): added"
		}
		var related runtime.Object // a nil *InstallPlan in the interface would not be nil
		if plan != nil {
			related = plan
		}
		// Names and reasons from the Subscription's status are quoted: escaped, as everything
		// written by others that an Event carries to `kubectl describe`.
		r.Recorder.Eventf(sub, related, corev1.EventTypeWarning, ReasonDrift, "Nudge", "%s", printable.Line(msg))
		ctrl.LoggerFrom(ctx).Info("Subscription in drift", "differences", drift.Summary(diffs), "since", episode.Since, "ownerRepaired", repaired)
		fallthrough
	case Nudge:
		if err := r.nudge(ctx, sub, now); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: after}, nil
}

// repairOwner runs the F1 repair when the plan lacks this Subscription's ownerReference: OLM
// notifies only a plan's owners, so such a Subscription goes stale (OLM issue #3199).
func (r *Reconciler) repairOwner(ctx context.Context, sub *v1alpha1.Subscription, plan *v1alpha1.InstallPlan) (bool, error) {
	if plan == nil {
		return false, nil
	}
	for _, ref := range plan.OwnerReferences {
		if ref.UID == sub.UID {
			return false, nil
		}
	}
	return write.RepairOwners(ctx, r.Client, r.Recorder, plan)
}

// referencedPlan reads the plan the Subscription references (drift.PlanKey): nil when it
// references none or the plan does not exist.
func (r *Reconciler) referencedPlan(ctx context.Context, sub *v1alpha1.Subscription) (*v1alpha1.InstallPlan, error) {
	key, ok := drift.PlanKey(sub)
	if !ok {
		return nil, nil
	}
	plan := &v1alpha1.InstallPlan{}
	if err := r.Client.Get(ctx, key, plan); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return plan, nil
}

// nudge bumps the resync annotation with a merge patch on metadata only: an event for OLM's
// subscription syncer, which recomputes the conditions from the plan.
func (r *Reconciler) nudge(ctx context.Context, sub *v1alpha1.Subscription, now time.Time) error {
	_, err := write.Nudge(ctx, r.Client, sub, now)
	return err
}

func (r *Reconciler) forget(key types.NamespacedName) Episode {
	r.mu.Lock()
	defer r.mu.Unlock()
	prev := r.episodes[key]
	delete(r.episodes, key)
	r.updateGauge()
	return prev
}

// updateGauge sets the drifting gauge from the reported episodes; r.mu is held.
func (r *Reconciler) updateGauge() {
	n := 0
	for _, e := range r.episodes {
		if e.Reported {
			n++
		}
	}
	metrics.SubscriptionsDrifting.Set(float64(n))
}

func describe(sub *v1alpha1.Subscription, plan *v1alpha1.InstallPlan) string {
	if plan == nil {
		return fmt.Sprintf("InstallPlan %s, which does not exist", sub.Status.InstallPlanRef.Name)
	}
	phase := string(plan.Status.Phase)
	if phase == "" {
		phase = "not yet reconciled"
	}
	return fmt.Sprintf("InstallPlan %s (phase %s)", plan.Name, phase)
}
