// Package csvcleanup runs olmguard's CSV cleanup finalizer (F3): it backfills olmguard.io/cleanup
// onto CSVs the webhook did not see, and when such a CSV is deleted it removes what OLM leaves
// behind (cluster objects always; operands only on a confirmed, opted-in uninstall), then releases
// the finalizer. Every step is idempotent, so a crash at any point resumes on the next reconcile.
package csvcleanup

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/internal/queueidle"
	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/operatorgroups"
	"github.com/olmguard/olmguard/pkg/write"
)

// Name of the reconciler and of its Events' reporting controller.
const Name = "csv-cleanup"

// waitForOperands is how often a cleanup re-checks operands that are still being deleted.
const waitForOperands = 2 * time.Second

// clusterKinds are the cluster-scoped kinds OLM labels for a CSV.
var clusterKinds = []schema.GroupVersionKind{
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"),
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"),
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
	{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
}

// Reconciler runs the cleanup finalizer.
type Reconciler struct {
	Client client.Client
	// Reader reads what is only needed during a cleanup, uncached.
	Reader         client.Reader
	Recorder       events.EventRecorder
	OperandCleanup cleanup.OperandCleanup
	Timeout        time.Duration
	Now            func() time.Time
}

// Options are the reconciler's settings.
type Options struct {
	// Timeout bounds an uninstall cleanup; then the finalizer is released with a Warning.
	Timeout time.Duration
	// OperandCleanup chooses when operands are deleted on uninstall.
	OperandCleanup cleanup.OperandCleanup
	// OrphanSweepInterval is how often bundled RBAC whose operator exists nowhere is looked for;
	// an orphan is deleted by the second sweep that finds it.
	OrphanSweepInterval time.Duration
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{Timeout: 10 * time.Minute, OperandCleanup: cleanup.OperandCleanupOptIn, OrphanSweepInterval: time.Minute}
}

var timeoutFlag = flags.Duration{Name: "cleanup-timeout", Least: time.Second,
	Usage: "how long an uninstall cleanup may take before its finalizer is released with a Warning event"}

var sweepFlag = flags.Duration{Name: "orphan-rbac-sweep-interval", Least: time.Second,
	Usage: "how often bundled ClusterRoles and ClusterRoleBindings whose operator exists nowhere (no CSV of that name or package) are looked for; one is deleted by the second sweep that finds it"}

// BindFlags registers the options' flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	timeoutFlag.Bind(fs, &o.Timeout)
	sweepFlag.Bind(fs, &o.OrphanSweepInterval)
	fs.Var(&o.OperandCleanup, "operand-cleanup", "when to delete an uninstalled operator's custom resources: opt-in (CSVs with spec.cleanup.enabled: true), always, never")
}

// Validate reports the first invalid option.
func (o Options) Validate() error {
	if err := timeoutFlag.Check(o.Timeout); err != nil {
		return err
	}
	if err := sweepFlag.Check(o.OrphanSweepInterval); err != nil {
		return err
	}
	var m cleanup.OperandCleanup
	if err := m.Set(string(o.OperandCleanup)); err != nil {
		return fmt.Errorf("--operand-cleanup %q: %w", o.OperandCleanup, err)
	}
	return nil
}

// CSVFields are the fields of a CSV the reconciler reads (csvFields): OLM's copies are cached as
// a stub, the others without their install strategy (a CSV can be megabytes).
var CSVFields = cacheneeds.Fields{Name: "csv-cleanup's CSV fields", Trim: csvFields}

// CacheNeeds is what the reconciler reads through the manager's cache. Of a CSV: the
// olm.copiedFrom label and the operator-namespace annotation (olm.IsCopiedCSV), olmguard's
// opt-out annotation, OLM's properties annotation (the package, cleanup.PackagesOf), and the
// fields of CSVFields; of Subscriptions and OperatorGroups, the typed views, no label or
// annotation. CSVs labelled olm.copiedFrom are left out, as OLM's own informers leave them out
// (issue 32: 20,000 copies of 40 KB on a cluster of 2,000 namespaces), except those labelled
// olmguard.io/cleanup-tracked: a CSV someone labelled olm.copiedFrom while it held olmguard's
// finalizer, which must still be cleaned up (issue 31 item 7; the webhook and TrackLabelledCSVs
// put the label on). A CSV labelled as a copy from its creation holds no finalizer and, like an
// OLM copy, no longer counts as a user of shared objects: OLM ignores it too, and deletes it as a
// copy whose original is gone.
func CacheNeeds() cacheneeds.Needs {
	return cacheneeds.Needs{
		{Object: &v1alpha1.ClusterServiceVersion{}, Label: cacheneeds.NotOLMCopies, Also: cacheneeds.TrackedCopies, Labels: []string{olm.CopiedFromLabel},
			Annotations: []string{olm.OperatorNamespaceAnnotation, olmguard.CleanupAnnotation, cleanup.PropertiesAnnotation}, Fields: CSVFields},
		{Object: &v1alpha1.Subscription{}, Fields: cacheneeds.SubscriptionView},
		{Object: &olmv1.OperatorGroup{}, Fields: cacheneeds.TypedView},
	}
}

// Add builds the reconciler with o and registers it with mgr.
func Add(mgr manager.Manager, o Options) error {
	r := &Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(Name),
		OperandCleanup: o.OperandCleanup, Timeout: o.Timeout, Now: time.Now}
	sweeper := &Sweeper{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(Name), Interval: o.OrphanSweepInterval}
	if err := mgr.Add(sweeper); err != nil {
		return err
	}
	tracker := &Tracker{Cache: mgr.GetCache(), Idle: queueidle.QueuesIdle(ctrlmetrics.Registry), Reader: mgr.GetAPIReader(), Client: mgr.GetClient()}
	if err := mgr.Add(tracker); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named(Name).
		For(&v1alpha1.ClusterServiceVersion{}, builder.WithPredicates(predicate.NewPredicateFuncs(mayNeedWork))).
		Complete(r)
}

// csvFields keeps of OLM's copies (status.reason Copied, which only OLM writes) their metadata
// with no annotation but the operator-namespace one, and their reason: the reconciler never acts
// on a copy, and counts none as a user of shared objects (cleanup.NewUsers), yet a copy carries
// its original's annotations, alm-examples among them (often 10 to 100 KB), into every target
// namespace. Of every other CSV it keeps the typed view without the install strategy.
func csvFields(obj client.Object) client.Object {
	c, ok := obj.(*v1alpha1.ClusterServiceVersion)
	if !ok {
		return obj
	}
	if cleanup.CopiedByOLM(string(c.Status.Reason)) {
		if c.Status.Phase == "" && c.Spec.InstallStrategy.StrategyName == "" {
			return c // a stub already: the transform's second pass, as the informer stores it
		}
		stub := &v1alpha1.ClusterServiceVersion{TypeMeta: c.TypeMeta, ObjectMeta: c.ObjectMeta,
			Status: v1alpha1.ClusterServiceVersionStatus{Reason: c.Status.Reason}}
		stub.Annotations = cacheneeds.Keep(c.Annotations, []string{olm.OperatorNamespaceAnnotation})
		return stub
	}
	c.Spec.InstallStrategy.StrategySpec.Raw = nil
	return c
}

// mayNeedWork leaves out OLM's copies that do not hold olmguard's finalizer: the reconciler never
// acts on them (no finalizer to backfill, none to release), and on a cluster of 2,000 namespaces
// they are 20,000 of the 22,000 CSVs its queue would otherwise hold at start.
func mayNeedWork(o client.Object) bool {
	c, ok := o.(*v1alpha1.ClusterServiceVersion)
	return !ok || !cleanup.CopiedByOLM(string(c.Status.Reason)) || cleanup.HasFinalizer(c.Finalizers)
}

// Reconcile backfills the finalizer, or runs the cleanup of a deleted CSV.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := r.Client.Get(ctx, req.NamespacedName, csv); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if csv.DeletionTimestamp != nil {
		return r.reconcileDelete(ctx, csv)
	}
	return reconcile.Result{}, r.reconcileNormal(ctx, csv)
}

// reconcileNormal backfills the finalizer on a CSV written while the webhook was away.
func (r *Reconciler) reconcileNormal(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) error {
	view := cleanup.CSVView{Namespace: csv.Namespace, Labels: csv.Labels, Annotations: csv.Annotations,
		Finalizers: csv.Finalizers, Reason: string(csv.Status.Reason)}
	if !cleanup.WantsCleanupFinalizer(view) {
		return nil
	}
	return r.patch(ctx, csv, cleanup.AddFinalizerPatch(csv.Finalizers, olmguard.CleanupFinalizer))
}

// reconcileDelete removes what OLM leaves behind of a deleted CSV, then releases the finalizer.
func (r *Reconciler) reconcileDelete(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) (reconcile.Result, error) {
	if !cleanup.HasFinalizer(csv.Finalizers) {
		return reconcile.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	if csv.Annotations[olmguard.CleanupAnnotation] == olmguard.CleanupDisabled {
		return reconcile.Result{}, r.release(ctx, csv, "the CSV opted out of cleanup")
	}
	if elapsed := r.Now().Sub(csv.DeletionTimestamp.Time); elapsed > r.Timeout {
		r.Recorder.Eventf(csv, nil, corev1.EventTypeWarning, "CleanupTimedOut", "Cleanup",
			"cleanup not finished after %s (--cleanup-timeout): finalizer released, leftovers may remain", r.Timeout)
		metrics.CleanupTimeouts.Inc()
		return reconcile.Result{}, r.release(ctx, csv, "cleanup timed out")
	}

	all := &v1alpha1.ClusterServiceVersionList{}
	if err := r.Client.List(ctx, all); err != nil {
		return reconcile.Result{}, err
	}
	subs := &v1alpha1.SubscriptionList{}
	if err := r.Client.List(ctx, subs, client.InNamespace(csv.Namespace)); err != nil {
		return reconcile.Result{}, err
	}
	var err error
	if subs.Items, err = r.confirmNaming(ctx, csv, subs.Items); err != nil {
		return reconcile.Result{}, err
	}
	var others, sameNamespace []v1alpha1.ClusterServiceVersion
	var refs []cleanup.CSVRef
	for _, o := range all.Items {
		if o.Namespace == csv.Namespace && o.Name == csv.Name {
			continue
		}
		others = append(others, o)
		var nsSubs []v1alpha1.Subscription
		if o.Namespace == csv.Namespace {
			sameNamespace = append(sameNamespace, o)
			nsSubs = subs.Items
		}
		refs = append(refs, cleanup.CSVRefOf(o.Namespace, o.Name, o.Labels, o.Annotations, string(o.Status.Reason), o.DeletionTimestamp != nil, nsSubs))
	}
	self := cleanup.CSVRefOf(csv.Namespace, csv.Name, csv.Labels, csv.Annotations, string(csv.Status.Reason), true, subs.Items)
	users := cleanup.NewUsers(refs)
	kind, why := cleanup.Classify(csv, sameNamespace, subs.Items)
	log = log.WithValues("classification", kind)

	n, err := r.deleteClusterObjects(ctx, csv, self, users, sameNamespace)
	if err != nil {
		return reconcile.Result{}, err
	}
	fromPlans, err := r.readPlans(ctx, csv)
	if err != nil {
		return reconcile.Result{}, err
	}
	planned, err := r.deletePlannedBundleRBAC(ctx, fromPlans.rbac, self, users)
	if err != nil {
		return reconcile.Result{}, err
	}
	n += planned
	if n > 0 {
		r.Recorder.Eventf(csv, nil, corev1.EventTypeNormal, "ClusterObjectsDeleted", "Cleanup",
			"deleted %d cluster-scoped objects of this CSV (%s: %s)", n, kind, why)
		metrics.CleanupDeletions.WithLabelValues("cluster").Add(float64(n))
	}
	if cleanup.DeleteOperands(kind, csv, r.OperandCleanup) {
		// Operands are data: the cache's word that no Subscription names the CSV is checked
		// against the apiserver, which may hold one the cache has not seen yet (a recreate taken
		// for an uninstall).
		live, err := r.liveNaming(ctx, csv)
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(live) > 0 {
			kind, why = cleanup.Classify(csv, sameNamespace, live)
			log = log.WithValues("classification", kind)
		}
	}
	if cleanup.DeleteOperands(kind, csv, r.OperandCleanup) {
		remaining, deleted, err := r.deleteOperands(ctx, csv, others, fromPlans.crds)
		if err != nil {
			return reconcile.Result{}, err
		}
		if deleted > 0 {
			r.Recorder.Eventf(csv, nil, corev1.EventTypeNormal, "OperandsDeleted", "Cleanup",
				"deleting %d custom resources of this operator's CRDs in its target namespaces (uninstall)", deleted)
			metrics.CleanupDeletions.WithLabelValues("operand").Add(float64(deleted))
		}
		if remaining > 0 {
			return reconcile.Result{RequeueAfter: waitForOperands}, nil
		}
	}
	log.Info("cleanup done", "reason", why)
	return reconcile.Result{}, r.release(ctx, csv, fmt.Sprintf("cleanup done (%s: %s)", kind, why))
}

// maxNamingReads bounds the live reads of confirmNaming; past it the cached Subscriptions stand,
// which keeps operands (a Recreate), the safe side.
const maxNamingReads = 20

// confirmNaming replaces the cached Subscriptions that name csv with what the apiserver holds now.
// Users uninstall by deleting the Subscription, then the CSV: on a busy apiserver the cache may
// still hold the deleted Subscription, and the uninstall would be taken for a Recreate, keeping the
// operands of a CSV that opted in to their cleanup. A Subscription the apiserver no longer has is
// dropped; the others are read one at a time, in the CSV's namespace only.
func (r *Reconciler) confirmNaming(ctx context.Context, csv *v1alpha1.ClusterServiceVersion, cached []v1alpha1.Subscription) ([]v1alpha1.Subscription, error) {
	out := make([]v1alpha1.Subscription, 0, len(cached))
	reads := 0
	for i := range cached {
		s := &cached[i]
		if !cleanup.NamesCSV(s, csv.Namespace, csv.Name) || reads >= maxNamingReads {
			out = append(out, *s)
			continue
		}
		reads++
		live := &v1alpha1.Subscription{}
		switch err := r.Reader.Get(ctx, client.ObjectKeyFromObject(s), live); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, err
		}
		out = append(out, *live)
	}
	return out, nil
}

// livePageSize bounds the Subscriptions liveNaming holds at once: a tenant who may create
// Subscriptions decides their size (a spec.config of a megabyte: docs/performance.md).
const livePageSize = 10

// liveNaming returns the Subscriptions of csv's namespace that name it (cleanup.NamesCSV) as the
// apiserver holds them now, read a page at a time, in the CSV's namespace only.
func (r *Reconciler) liveNaming(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) ([]v1alpha1.Subscription, error) {
	var out []v1alpha1.Subscription
	cont := ""
	for {
		page := &v1alpha1.SubscriptionList{}
		if err := r.Reader.List(ctx, page, client.InNamespace(csv.Namespace), client.Limit(livePageSize), client.Continue(cont)); err != nil {
			return nil, err
		}
		for i := range page.Items {
			if s := &page.Items[i]; cleanup.NamesCSV(s, csv.Namespace, csv.Name) {
				out = append(out, *s)
			}
		}
		if cont = page.Continue; cont == "" {
			return out, nil
		}
	}
}

// release removes olmguard's finalizer, never any other.
func (r *Reconciler) release(ctx context.Context, csv *v1alpha1.ClusterServiceVersion, why string) error {
	if err := r.patch(ctx, csv, cleanup.RemoveFinalizerPatch(csv.Finalizers, olmguard.CleanupFinalizer)); err != nil {
		return err
	}
	r.Recorder.Eventf(csv, nil, corev1.EventTypeNormal, "CleanupFinalizerReleased", "Cleanup", "olmguard.io/cleanup removed: %s", why)
	return nil
}

func (r *Reconciler) patch(ctx context.Context, obj client.Object, ops []jsonpatch.Operation) error {
	send := write.JSONPatch
	if len(ops) > 0 && ops[0].Operation == "add" && ops[0].Path == "/metadata/finalizers" {
		// Creating the list: guard against a finalizer OLM adds at the same moment.
		send = write.GuardedJSONPatch
	}
	_, err := send(ctx, r.Client, obj, ops)
	return err
}

// deleteClusterObjects deletes the cluster-scoped objects that belong to the CSV, and its
// kube-system auth-reader RoleBindings when no other CSV needs them. It returns how many it deleted.
func (r *Reconciler) deleteClusterObjects(ctx context.Context, csv *v1alpha1.ClusterServiceVersion, self cleanup.CSVRef, users cleanup.Users, sameNamespace []v1alpha1.ClusterServiceVersion) (int, error) {
	deleted := 0
	services := cleanup.ServiceNames(csv)
	for _, gvk := range clusterKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Reader.List(ctx, list, client.MatchingLabels{olm.OwnerLabel: csv.Name}); err != nil {
			if apierrors.IsNotFound(err) || apimeta.IsNoMatchError(err) {
				continue
			}
			return deleted, fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if !cleanup.Owned(cleanup.Object{Kind: gvk.Kind, Name: o.Name, UID: o.UID, Labels: o.Labels}, self, users, services) {
				continue
			}
			o.SetGroupVersionKind(gvk)
			if err := r.deleteExact(ctx, o, &deleted); err != nil {
				return deleted, err
			}
		}
	}
	for svc := range services {
		rb := &rbacv1.RoleBinding{}
		err := r.Reader.Get(ctx, types.NamespacedName{Namespace: "kube-system", Name: olm.AuthReaderRoleBindingName(svc)}, rb)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return deleted, err
		}
		var subjects []cleanup.Subject
		for _, s := range rb.Subjects {
			subjects = append(subjects, cleanup.Subject{Kind: s.Kind, Name: s.Name, Namespace: s.Namespace})
		}
		if !cleanup.AuthReaderDeletable(svc, subjects, self, users, csv, sameNamespace) {
			continue
		}
		if err := r.deleteExact(ctx, rb, &deleted); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// deleteExact deletes exactly the object that was read (UID precondition), and counts it in
// deleted when it deleted something.
func (r *Reconciler) deleteExact(ctx context.Context, o client.Object, deleted *int) error {
	ok, err := write.DeleteExact(ctx, r.Client, o)
	if err != nil {
		return fmt.Errorf("deleting %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err)
	}
	if ok {
		*deleted++
	}
	return nil
}

// deleteOperands deletes the custom resources of the CRDs the CSV alone owns and OLM installed for
// it (cleanup.OLMInstalledCRD, with fromPlans the CRDs its plans show: readPlans), in the
// namespaces its OperatorGroup targets. It returns how many still exist and how many it asked to
// delete.
func (r *Reconciler) deleteOperands(ctx context.Context, csv *v1alpha1.ClusterServiceVersion, others []v1alpha1.ClusterServiceVersion, fromPlans map[string]bool) (remaining, deleted int, err error) {
	targets, err := r.targetNamespaces(ctx, csv.Namespace)
	if err != nil || len(targets) == 0 {
		return 0, 0, err
	}
	for _, d := range cleanup.OperandCRDs(csv, others) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := r.Reader.Get(ctx, types.NamespacedName{Name: d.Name}, crd); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return 0, 0, err
		}
		if !cleanup.OLMInstalledCRD(crd.Name, crd.Annotations, csv.Namespace, csv.Name, fromPlans) {
			ctrl.LoggerFrom(ctx).Info("operands kept: OLM did not install their CRD for this CSV", "crd", crd.Name)
			r.Recorder.Eventf(csv, nil, corev1.EventTypeNormal, "OperandsKept", "Cleanup",
				"custom resources of CRD %s kept: no InstallPlan step of this namespace and no OLM annotation on the CRD shows OLM installed it for this CSV", crd.Name)
			continue
		}
		if crd.Spec.Scope != apiextensionsv1.NamespaceScoped || crd.Spec.Names.Kind != d.Kind {
			continue // cluster-scoped operands cannot be limited to target namespaces
		}
		gvk := schema.GroupVersionKind{Group: crd.Spec.Group, Version: storageVersion(crd), Kind: crd.Spec.Names.Kind}
		for _, ns := range targets {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := r.Reader.List(ctx, list, client.InNamespace(ns)); err != nil {
				return 0, 0, fmt.Errorf("listing %s in %s: %w", d.Name, ns, err)
			}
			for i := range list.Items {
				o := &list.Items[i]
				remaining++
				if o.DeletionTimestamp != nil {
					continue
				}
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(gvk)
				u.SetNamespace(o.Namespace)
				u.SetName(o.Name)
				u.SetUID(o.UID)
				if err := r.deleteExact(ctx, u, &deleted); err != nil {
					return 0, 0, err
				}
			}
		}
	}
	return remaining, deleted, nil
}

// planPageSize bounds the InstallPlans read at once: a plan of an older OLM carries whole
// manifests in its steps.
const planPageSize = 5

// planEvidence is what the steps of the InstallPlans of a CSV's namespace show OLM applied for
// the CSV: CRDs (cleanup.PlanCRDs) and bundle-manifest RBAC (cleanup.PlanBundleRBAC).
type planEvidence struct {
	crds map[string]bool
	rbac map[cleanup.StepObject]bool
}

// readPlans reads the InstallPlans of the CSV's namespace live, a page at a time, once per
// cleanup pass, for both the cluster objects and the operands.
func (r *Reconciler) readPlans(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) (planEvidence, error) {
	ev := planEvidence{crds: map[string]bool{}, rbac: map[cleanup.StepObject]bool{}}
	cont := ""
	for {
		plans := &v1alpha1.InstallPlanList{}
		if err := r.Reader.List(ctx, plans, client.InNamespace(csv.Namespace), client.Limit(planPageSize), client.Continue(cont)); err != nil {
			return ev, fmt.Errorf("listing InstallPlans in %s: %w", csv.Namespace, err)
		}
		for i := range plans.Items {
			cleanup.PlanCRDs(&plans.Items[i], csv.Name, ev.crds)
			cleanup.PlanBundleRBAC(&plans.Items[i], csv.Name, ev.rbac)
		}
		if cont = plans.Continue; cont == "" {
			return ev, nil
		}
	}
}

// deletePlannedBundleRBAC deletes the bundle-manifest ClusterRoles and bindings that the plans
// of the CSV's namespace show OLM applied for it (planned, readPlans) and never labelled
// olm.owner (cleanup.OwnedByPlanStep). Once the plans are gone (garbage-collected with a
// Subscription deleted first) such an object is kept: docs/cleanup.md, "A bundled ClusterRole OLM
// applied once".
func (r *Reconciler) deletePlannedBundleRBAC(ctx context.Context, planned map[cleanup.StepObject]bool, self cleanup.CSVRef, users cleanup.Users) (int, error) {
	deleted := 0
	for _, so := range slices.SortedFunc(maps.Keys(planned), func(a, b cleanup.StepObject) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	}) {
		// A List by name: the controller's role may list these kinds, not get them.
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(so.Kind + "List"))
		if err := r.Reader.List(ctx, list, client.MatchingFields{"metadata.name": so.Name}); err != nil {
			return deleted, fmt.Errorf("reading %s %s: %w", so.Kind, so.Name, err)
		}
		if len(list.Items) != 1 {
			continue
		}
		o := &list.Items[0]
		o.SetGroupVersionKind(rbacv1.SchemeGroupVersion.WithKind(so.Kind))
		if !cleanup.OwnedByPlanStep(cleanup.Object{Kind: so.Kind, Name: o.Name, UID: o.UID, Labels: o.Labels}, self, users) {
			continue
		}
		if err := r.deleteExact(ctx, o, &deleted); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

func storageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return crd.Spec.Versions[0].Name
}

// targetNamespaces are the namespaces the OperatorGroup of ns targets (all, for AllNamespaces).
func (r *Reconciler) targetNamespaces(ctx context.Context, ns string) ([]string, error) {
	ogs := &olmv1.OperatorGroupList{}
	if err := r.Client.List(ctx, ogs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	if n := len(ogs.Items); operatorgroups.TooMany(n) || operatorgroups.Missing(n) {
		return nil, nil // OLM itself refuses to run without exactly one group
	}
	var all []string
	if ogs.Items[0].Status.AllNamespaces() {
		nss := &metav1.PartialObjectMetadataList{}
		nss.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
		if err := r.Reader.List(ctx, nss); err != nil {
			return nil, err
		}
		for _, n := range nss.Items {
			all = append(all, n.Name)
		}
	}
	return cleanup.TargetNamespaces(ogs.Items[0].Status.Namespaces, all), nil
}
