// Package unpackjobs keeps OLM's bundle unpack Jobs visible to OLM and tidy (F4, OLM issue
// #3210): it labels or deletes the Jobs pkg/unpack finds OLM cannot see, and finished ones left
// without a TTL.
package unpackjobs

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/pkg/write"
)

// Name of the reconciler and of its Events' reporting controller.
const Name = "unpack-jobs"

// Reconciler labels or deletes unpack Jobs OLM cannot see, and finished ones left without a TTL.
type Reconciler struct {
	Client client.Client
	// Reader reads the Job and its owning ConfigMap live: only Job metadata is cached, and
	// ConfigMaps are not cached at all (there are many).
	Reader   client.Reader
	Recorder events.EventRecorder
	TTL      time.Duration
	// RetryFailed removes failed unpack Jobs so that OLM before v0.43 unpacks again, once they
	// have been failed for RetryFailedAfter (--unpack-retry-failed, OLM issue #2265).
	RetryFailed      bool
	RetryFailedAfter time.Duration
	Now              func() time.Time
}

// Options are the reconciler's settings.
type Options struct {
	// TTL is how long a finished unpack Job left without a TTL is kept (--unpack-job-retention).
	TTL time.Duration
	// RetryFailed turns on the removal of failed unpack Jobs (off by default).
	RetryFailed bool
	// RetryFailedAfter is how long an unpack Job must have been failed before it is removed.
	RetryFailedAfter time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{TTL: 10 * time.Minute, RetryFailedAfter: 2 * time.Minute}
}

// ttlFlag's bound leaves OLM the time to read a finished unpack Job's outcome. Its former name,
// --unpack-job-ttl, is the webhook's former name for another setting (the TTL it gives to the
// Jobs it admits, --unpack-job-default-ttl).
var ttlFlag = flags.Duration{Name: "unpack-job-retention", Former: "unpack-job-ttl", Least: time.Minute,
	Usage: "how long a finished bundle unpack Job without a ttlSecondsAfterFinished is kept before the controller deletes it"}

// retryAfterFlag's bound leaves OLM the time to record the failure on the Subscriptions, and
// users the time to read it, before the Job is gone.
var retryAfterFlag = flags.Duration{Name: "unpack-retry-failed-after", Least: 30 * time.Second,
	Usage: "with --unpack-retry-failed: how long an unpack Job must have been failed before it is removed"}

// BindFlags registers the options' flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	ttlFlag.Bind(fs, &o.TTL)
	fs.BoolVar(&o.RetryFailed, "unpack-retry-failed", o.RetryFailed,
		"remove bundle unpack Jobs that failed (DeadlineExceeded, BackoffLimitExceeded), and their ConfigMap when it holds no bundle, so that OLM before v0.43 unpacks again (OLM issue #2265)")
	retryAfterFlag.Bind(fs, &o.RetryFailedAfter)
}

// Validate reports the first invalid option.
func (o Options) Validate() error {
	if err := ttlFlag.Check(o.TTL); err != nil {
		return err
	}
	return retryAfterFlag.Check(o.RetryFailedAfter)
}

// Add builds the reconciler with o and registers it with mgr. Jobs are watched metadata-only:
// most of a cluster's Jobs are not OLM's, and decoding every one in full would cost memory in
// proportion to them (docs/performance.md). The few owned by a ConfigMap are read live when
// reconciled.
func Add(mgr manager.Manager, o Options) error {
	r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(Name), TTL: o.TTL,
		RetryFailed: o.RetryFailed, RetryFailedAfter: o.RetryFailedAfter, Now: time.Now}
	return ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&batchv1.Job{}, builder.OnlyMetadata,
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return unpack.ConfigMapOwner(o) != "" }))).
		Complete(r)
}

// CacheNeeds is what the reconciler reads through the manager's cache: Jobs as metadata, and of
// that only their ownerReferences to a ConfigMap (its predicate; the rest is read live).
func CacheNeeds() cacheneeds.Needs {
	jobs := &metav1.PartialObjectMetadata{}
	jobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("Job"))
	return cacheneeds.Needs{{Object: jobs, Fields: cacheneeds.Fields{Name: "unpack-jobs' ConfigMap owners", Trim: configMapOwnersOnly}}}
}

// configMapOwnersOnly keeps of a Job's metadata what identifies it and its ownerReferences to a
// ConfigMap: most of a cluster's Jobs are not OLM's, and only those can be.
func configMapOwnersOnly(obj client.Object) client.Object {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return obj
	}
	var refs []metav1.OwnerReference
	if ref, ok := unpack.ConfigMapOwnerRef(m); ok {
		refs = []metav1.OwnerReference{ref}
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
		ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp, OwnerReferences: refs}}
}

// catalogSourceExists reports whether the owner is a live CatalogSource in the namespace (same
// UID). OLM puts unpack ConfigMaps and Jobs in the CatalogSource's namespace; a tenant's
// look-alike elsewhere points at nothing and is left alone, even before the garbage collector
// removes it.
func (r *Reconciler) catalogSourceExists(ctx context.Context, namespace string, owner metav1.OwnerReference) (bool, error) {
	cs := &metav1.PartialObjectMetadata{}
	cs.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.CatalogSourceKind))
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: owner.Name}, cs); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	return cs.UID == owner.UID, nil
}

// Reconcile handles one Job owned by a ConfigMap.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	job := &batchv1.Job{}
	if err := r.Reader.Get(ctx, req.NamespacedName, job); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if job.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // going already
	}
	return r.reconcileNormal(ctx, job)
}

// reconcileNormal labels or deletes an unpack Job of a live CatalogSource as pkg/unpack decides.
func (r *Reconciler) reconcileNormal(ctx context.Context, job *batchv1.Job) (reconcile.Result, error) {
	ref, ok := unpack.ConfigMapOwnerRef(job)
	if !ok {
		return reconcile.Result{}, nil
	}
	cmName := ref.Name
	cm := &corev1.ConfigMap{}
	if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: job.Namespace, Name: cmName}, cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Whoever may create a Job can name any ConfigMap as its owner: only OLM's unpack ConfigMap,
	// matched by UID, makes it an unpack Job (the rule doctor applies too).
	if !unpack.IsUnpackOwner(cm, ref) {
		return reconcile.Result{}, nil // not OLM's: nothing of ours
	}
	owner, _ := unpack.CatalogSourceOwner(cm)
	if ok, err := r.catalogSourceExists(ctx, job.Namespace, owner); err != nil || !ok {
		return reconcile.Result{}, err
	}
	if _, failed := unpack.Failed(job); failed && r.RetryFailed && unpack.Visible(job) {
		return r.retryFailed(ctx, job, cm, owner)
	}
	d := unpack.Decide(job, r.Now(), r.TTL)
	switch d.Action {
	case unpack.None:
		return reconcile.Result{RequeueAfter: d.RequeueAfter}, nil
	case unpack.Label:
		// Append only: OLM's own labels stay, the missing ones are added.
		labels := map[string]string{}
		if job.Labels[olm.ManagedLabel] != olm.ManagedLabelValue {
			labels[olm.ManagedLabel] = olm.ManagedLabelValue
		}
		if job.Labels[olm.BundleUnpackRefLabel] == "" {
			labels[olm.BundleUnpackRefLabel] = cmName
		}
		patch, err := jsonMergeLabels(labels)
		if err != nil {
			return reconcile.Result{}, err
		}
		if patched, err := write.MergePatch(ctx, r.Client, job, patch); !patched {
			return reconcile.Result{}, err
		}
	case unpack.Delete:
		deleted, err := write.DeleteExact(ctx, r.Client, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("deleting unpack Job %s/%s: %w", job.Namespace, job.Name, err)
		}
		if !deleted {
			return reconcile.Result{}, nil
		}
		if !unpack.Visible(job) {
			// OLM failed to create this Job under its own name; it retries only after a back-off.
			if err := r.nudgeWaiting(ctx, job.Namespace, owner.Name); err != nil {
				return reconcile.Result{}, err
			}
		}
	}
	metrics.UnpackJobRepairs.WithLabelValues(string(d.Action), d.Reason).Inc()
	ctrl.LoggerFrom(ctx).Info("repaired unpack Job", "action", d.Action, "reason", d.Reason)
	r.Recorder.Eventf(cm, job, corev1.EventTypeNormal, eventReasons[d.Action], string(d.Action),
		"%s unpack Job %s: %s (OLM issue #3210)", d.Action, job.Name, d.Reason)
	return reconcile.Result{}, nil
}

// nudgeWaiting makes OLM resolve again, at once, every namespace with a Subscription to the
// catalog that may be waiting on the bundle of a deleted Job.
func (r *Reconciler) nudgeWaiting(ctx context.Context, catalogNamespace, catalogName string) error {
	subs, err := r.waitingSubscriptions(ctx, catalogNamespace, catalogName)
	if err != nil {
		return err
	}
	return r.nudge(ctx, subs)
}

// subscriptionPageSize is how many Subscriptions one List request of waitingSubscriptions returns:
// a tenant decides their number and their size (a spec.config of a megabyte), so they are read a
// page at a time, cluster-wide, and only those waiting on the catalog are kept, trimmed.
const subscriptionPageSize = 10

// waitingSubscriptions lists, live, the Subscriptions to the catalog that may be waiting on one of
// its bundles, as trimmed views (what the nudge, the Event and the OperatorGroup check read).
func (r *Reconciler) waitingSubscriptions(ctx context.Context, catalogNamespace, catalogName string) ([]*v1alpha1.Subscription, error) {
	var waiting []*v1alpha1.Subscription
	cont := ""
	for {
		page := &v1alpha1.SubscriptionList{}
		opts := []client.ListOption{client.Limit(subscriptionPageSize)}
		if cont != "" {
			opts = append(opts, client.Continue(cont))
		}
		if err := r.Reader.List(ctx, page, opts...); err != nil {
			return nil, fmt.Errorf("listing the Subscriptions to nudge: %w", err)
		}
		for _, s := range unpack.WaitingSubscriptions(page.Items, catalogNamespace, catalogName) {
			waiting = append(waiting, &v1alpha1.Subscription{
				ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: s.Name, UID: s.UID, ResourceVersion: s.ResourceVersion},
				Spec:       v1alpha1.SubscriptionSpec{CatalogSource: s.Spec.CatalogSource, CatalogSourceNamespace: s.Spec.CatalogSourceNamespace, Package: s.Spec.Package},
				Status:     v1alpha1.SubscriptionStatus{State: s.Status.State}})
		}
		if cont = page.Continue; cont == "" {
			return waiting, nil
		}
	}
}

// nudge makes OLM resolve the Subscriptions' namespaces again, at once.
func (r *Reconciler) nudge(ctx context.Context, subs []*v1alpha1.Subscription) error {
	now := r.Now()
	for _, s := range subs {
		nudged, err := write.Nudge(ctx, r.Client, s, now)
		if err != nil {
			return fmt.Errorf("nudging Subscription %s/%s: %w", s.Namespace, s.Name, err)
		}
		if nudged {
			ctrl.LoggerFrom(ctx).Info("nudged OLM to resolve again", "subscription", client.ObjectKeyFromObject(s))
		}
	}
	return nil
}

var eventReasons = map[unpack.Action]string{unpack.Label: "UnpackJobLabelled", unpack.Delete: "UnpackJobDeleted"}

func jsonMergeLabels(labels map[string]string) ([]byte, error) {
	return json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
}
