// Package catalogpods recovers OLM catalog pods stranded on nodes that stopped responding (F5,
// OLM issue #3208), and dead ones OLM keeps on any node (a terminal phase: OLM #3459, #3519,
// OCPBUGS-46474): when pkg/catalog decides a pod may go, it force-deletes it, rate limited, so
// OLM recreates it.
package catalogpods

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/pkg/catalog"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/write"
)

// Name of the reconciler and of its Events' reporting controller.
const Name = "catalog-pods"

// The reasons of the Warning Events on the CatalogSource of a deleted pod: one stranded on a
// lost node, one in a terminal phase (Failed, e.g. Evicted) that OLM keeps.
const (
	EventRecovered       = "CatalogPodRecovered"
	EventFailedRecovered = "CatalogPodFailedRecovered"
)

// Reconciler force-deletes catalog pods stranded on NotReady or missing nodes, and catalog pods
// in a terminal phase.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Grace is --catalog-pod-grace.
	Grace time.Duration
	// Limiter bounds deletions per namespace and in all (--catalog-pod-deletions-per-minute and
	// --catalog-pod-deletions-per-minute-per-namespace).
	Limiter *Limiter
	Now     func() time.Time

	// gone remembers when a pod's node was first seen missing (pod name -> goneEntry).
	gone sync.Map
}

type goneEntry struct {
	uid   types.UID
	since time.Time
}

// Options are the reconciler's settings.
type Options struct {
	// Grace is how long a catalog pod may sit on a NotReady or unreachable node before it is
	// force-deleted.
	Grace time.Duration
	// DeletionsPerMinute rate limits those deletions in all namespaces together.
	DeletionsPerMinute int
	// DeletionsPerMinutePerNamespace rate limits them in each namespace, so that one namespace's
	// stranded pods cannot use up the budget of all.
	DeletionsPerMinutePerNamespace int
}

// DefaultOptions are the flag defaults: 10 a minute in all, 3 in one namespace, so pods stranded
// in one namespace take at most 3 of the 10 and leave 7 to the others.
func DefaultOptions() Options {
	return Options{Grace: 30 * time.Second, DeletionsPerMinute: 10, DeletionsPerMinutePerNamespace: 3}
}

var graceFlag = flags.Duration{Name: "catalog-pod-grace", Least: time.Second,
	Usage: "how long a catalog pod may sit on a NotReady or unreachable node before it is force-deleted"}

// BindFlags registers the options' flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	graceFlag.Bind(fs, &o.Grace)
	fs.IntVar(&o.DeletionsPerMinute, "catalog-pod-deletions-per-minute", o.DeletionsPerMinute, "maximum catalog pod force-deletions per minute, all namespaces together")
	fs.IntVar(&o.DeletionsPerMinutePerNamespace, "catalog-pod-deletions-per-minute-per-namespace", o.DeletionsPerMinutePerNamespace,
		"maximum catalog pod force-deletions per minute in one namespace (within --catalog-pod-deletions-per-minute)")
}

// Validate reports the first invalid option.
func (o Options) Validate() error {
	if err := graceFlag.Check(o.Grace); err != nil {
		return err
	}
	if o.DeletionsPerMinute < 1 {
		return fmt.Errorf("--catalog-pod-deletions-per-minute %d must be at least 1", o.DeletionsPerMinute)
	}
	if o.DeletionsPerMinutePerNamespace < 1 {
		return fmt.Errorf("--catalog-pod-deletions-per-minute-per-namespace %d must be at least 1", o.DeletionsPerMinutePerNamespace)
	}
	return nil
}

// CacheNeeds is how the reconciler's objects are cached: only pods labelled olm.catalogSource (the
// apiserver filters by label; it cannot by ownerReference), of which those without an
// ownerReference to a CatalogSource are kept as a bare name and the others with only their
// metadata, node and phase (trimPod), and nodes without their images and volumes, which the
// reconciler never reads. CatalogSources are read through the
// manager's client as metadata, which caches them metadata-only.
//
// Of pods it reads the olm.catalogSource label, of Nodes the zone label, and no annotation.
func CacheNeeds() cacheneeds.Needs {
	catalogPods, _ := labels.NewRequirement(olm.CatalogSourceLabel, selection.Exists, nil)
	cs := &metav1.PartialObjectMetadata{}
	cs.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.CatalogSourceKind))
	return cacheneeds.Needs{
		{Object: &corev1.Pod{}, Label: labels.NewSelector().Add(*catalogPods), Labels: []string{olm.CatalogSourceLabel},
			Fields: cacheneeds.Fields{Name: "catalog-pods' pod fields", Trim: trimPod}},
		{Object: &corev1.Node{}, Labels: []string{catalog.ZoneLabel}, Fields: cacheneeds.Fields{Name: "catalog-pods' node fields", Trim: trimNode}},
		{Object: cs},
	}
}

// Add builds the reconciler with o and registers it with mgr.
func Add(mgr manager.Manager, o Options) error {
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name), Grace: o.Grace,
		Limiter: NewLimiter(o.DeletionsPerMinute, o.DeletionsPerMinutePerNamespace), Now: time.Now}
	return r.SetupWithManager(mgr)
}

// trimPod keeps a pod that names no CatalogSource as its owner as nothing but its name: anyone
// who can create a pod can label it olm.catalogSource, and such a pod is never acted on (the
// reconciler sees no label and no owner), so the cache holds none of what a tenant wrote into it.
// Of the pods OLM creates it keeps what the reconciler reads: the metadata (without managed
// fields), spec.nodeName and status.phase (a terminal phase: pkg/catalog's ReasonPodFailed).
func trimPod(obj client.Object) client.Object {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj
	}
	if _, owned := catalog.CatalogSourceOwner(p); !owned {
		return &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
			ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp}}
	}
	return &corev1.Pod{TypeMeta: p.TypeMeta, ObjectMeta: p.ObjectMeta, Spec: corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase}}
}

// trimNode keeps what the reconciler reads of a Node: name, labels, creation time, conditions.
func trimNode(obj client.Object) client.Object {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj
	}
	n.Status = corev1.NodeStatus{Conditions: n.Status.Conditions}
	n.Spec = corev1.NodeSpec{Taints: n.Spec.Taints}
	return n
}

// SetupWithManager watches catalog pods, and Nodes whose readiness changes. Every change of a
// candidate pod is reconciled, its status's too: a pod turning Failed on a Ready node is decided
// on when the kubelet writes the phase.
func (r *Reconciler) SetupWithManager(mgr manager.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&corev1.Pod{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			p, ok := o.(*corev1.Pod)
			return ok && isCandidate(p)
		}))).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.allCatalogPods), builder.WithPredicates(readinessChanged{})).
		Complete(r)
}

// readinessChanged passes node creations, deletions and Ready transitions, not heartbeats.
type readinessChanged struct{ predicate.Funcs }

func (readinessChanged) Update(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*corev1.Node)
	n, okNew := e.ObjectNew.(*corev1.Node)
	return !okOld || !okNew || catalog.NodeReady(o) != catalog.NodeReady(n)
}

// isCandidate reports whether a cached pod may be a catalog pod: labelled and naming a
// CatalogSource as its owner. Whether that CatalogSource exists is checked when reconciling.
func isCandidate(p *corev1.Pod) bool {
	_, labelled := p.Labels[olm.CatalogSourceLabel]
	_, owned := catalog.CatalogSourceOwner(p)
	return labelled && owned
}

// allCatalogPods maps a node readiness change to every catalog pod: the change can start a grace
// period, or lift the outage guard for pods on other nodes. Catalog pods are few (about one per
// CatalogSource) and the cache holds nothing else of use.
func (r *Reconciler) allCatalogPods(ctx context.Context, o client.Object) []reconcile.Request {
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing catalog pods", "node", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pods.Items))
	for i := range pods.Items {
		if p := &pods.Items[i]; isCandidate(p) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return reqs
}

// catalogSourceUID returns the UID of the CatalogSource the pod names as its owner, if one of that
// name exists in the pod's namespace ("" otherwise), read as metadata through the cache.
func (r *Reconciler) catalogSourceUID(ctx context.Context, pod *corev1.Pod) (types.UID, error) {
	ref, ok := catalog.CatalogSourceOwner(pod)
	if !ok {
		return "", nil
	}
	cs := &metav1.PartialObjectMetadata{}
	cs.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.CatalogSourceKind))
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: ref.Name}, cs); err != nil {
		return "", client.IgnoreNotFound(err)
	}
	return cs.UID, nil
}

// Reconcile decides about one catalog pod and, when its node is lost or it is dead, deletes it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.gone.Delete(req.NamespacedName)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return r.reconcileNormal(ctx, pod)
}

// reconcileNormal deletes the pod when pkg/catalog says its node is lost or the pod is in a
// terminal phase. A pod already being deleted is handled the same way: its kubelet may never
// confirm the deletion.
func (r *Reconciler) reconcileNormal(ctx context.Context, pod *corev1.Pod) (reconcile.Result, error) {
	key := client.ObjectKeyFromObject(pod)
	if !isCandidate(pod) {
		return reconcile.Result{}, nil // a tenant's look-alike: never acted on, never read further
	}
	csUID, err := r.catalogSourceUID(ctx, pod)
	if err != nil {
		return reconcile.Result{}, err
	}
	now := r.Now()
	var node *corev1.Node
	var goneSince time.Time
	if pod.Spec.NodeName != "" {
		node = &corev1.Node{}
		if err := r.Client.Get(ctx, types.NamespacedName{Name: pod.Spec.NodeName}, node); err != nil {
			if !apierrors.IsNotFound(err) {
				return reconcile.Result{}, err
			}
			node = nil
			v, _ := r.gone.LoadOrStore(key, goneEntry{uid: pod.UID, since: now})
			e := v.(goneEntry)
			if e.uid != pod.UID { // a new pod of the same name starts its own clock
				e = goneEntry{uid: pod.UID, since: now}
				r.gone.Store(key, e)
			}
			goneSince = e.since
		} else {
			r.gone.Delete(key)
		}
	}
	nodes := &corev1.NodeList{}
	if err := r.Client.List(ctx, nodes); err != nil {
		return reconcile.Result{}, err
	}
	d := catalog.Decide(pod, csUID, node, goneSince, now, r.Grace, catalog.NodeHealth(nodes.Items))
	log := ctrl.LoggerFrom(ctx).WithValues("node", pod.Spec.NodeName, "reason", d.Reason)
	switch {
	case d.Reason == catalog.ReasonClusterOutage || d.Reason == catalog.ReasonZoneOutage:
		metrics.CatalogPodRecoveriesHeld.WithLabelValues(string(d.Reason)).Inc()
		log.Info("catalog pod left on its NotReady node: too many nodes are NotReady to trust the signal")
		return reconcile.Result{}, nil // a node turning Ready again re-triggers the decision
	case !d.Delete:
		return reconcile.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	if delay := r.Limiter.Take(pod.Namespace, now); delay > 0 {
		metrics.CatalogPodRecoveriesHeld.WithLabelValues("RateLimited").Inc()
		return reconcile.Result{RequeueAfter: delay}, nil
	}
	deleted, err := write.DeleteExact(ctx, r.Client, pod, client.GracePeriodSeconds(0))
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("deleting catalog pod %s: %w", key, err)
	}
	if !deleted {
		return reconcile.Result{}, nil // gone already, or replaced by a pod of the same name
	}
	r.gone.Delete(key)
	metrics.CatalogPodRecoveries.WithLabelValues(string(d.Reason)).Inc()
	reason, note := EventRecovered, fmt.Sprintf("deleted catalog pod %s stranded on node %s (%s) so OLM recreates it on a healthy node (OLM issue #3208)",
		pod.Name, pod.Spec.NodeName, d.Reason)
	if d.Reason == catalog.ReasonPodFailed {
		// OLM #3459, #3519, OCPBUGS-46474: OLM keeps a registry pod the kubelet evicted or stopped.
		reason, note = EventFailedRecovered, fmt.Sprintf("deleted catalog pod %s, phase %s on node %s, which OLM keeps as its registry server "+
			"(OLM issues #3459, #3519), so OLM recreates it", pod.Name, pod.Status.Phase, pod.Spec.NodeName)
		log.Info("deleted dead catalog pod OLM keeps so OLM recreates it (OLM issues #3459, #3519)", "phase", pod.Status.Phase)
	} else {
		log.Info("deleted catalog pod stranded on a lost node so OLM recreates it (OLM issue #3208)")
	}
	if ref, ok := catalog.CatalogSourceOwner(pod); ok {
		cs := &v1alpha1.CatalogSource{TypeMeta: metav1.TypeMeta{APIVersion: ref.APIVersion, Kind: ref.Kind},
			ObjectMeta: metav1.ObjectMeta{Name: ref.Name, Namespace: pod.Namespace, UID: ref.UID}}
		r.Recorder.Eventf(cs, pod, corev1.EventTypeWarning, reason, "Recover", "%s", note)
	}
	return reconcile.Result{}, nil
}
