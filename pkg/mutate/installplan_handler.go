package mutate

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/review"
)

// SubscriptionLister returns the Subscriptions of a namespace. Without withInstallPlanRef the
// caller needs only names, UIDs and deletion (an InstallPlan CREATE: OLM means a new plan to be
// owned by every Subscription), and InstallPlanRef may be left empty.
type SubscriptionLister interface {
	Subscriptions(ctx context.Context, namespace string, withInstallPlanRef bool) ([]Subscription, error)
}

// LiveSubscriptions lists Subscriptions from the apiserver on every call: the webhook must see a
// Subscription created the moment before the plan (the OLM issue #3199 window), which no cache of
// its own can promise.
//
// The F1 guarantee rests on the read being linearizable. The Subscription #3199 leaves out of a
// plan was committed before OLM's resolver listed Subscriptions, so before the plan's CREATE was
// sent (olm-facts.md §1.5). A consistent List (no resourceVersion, the default here) returns every
// object committed before it began, on whichever apiserver serves it: Kubernetes 1.31+ serves it
// from the watch cache once that cache has caught up with etcd's current revision, older versions
// from etcd. A watch-cache read (WatchCache, resourceVersion "0") answers from what the serving
// apiserver's cache has received so far, which can trail a write made a moment before, on that
// apiserver or, behind several apiservers, on another one (test/ha shows both). Its answers are
// counted as such (olmguard_webhook_subscription_reads_total{read="watch-cache"}) and the
// controller repairs any plan a stale read missed once OLM points the Subscription at it.
type LiveSubscriptions struct {
	Reader client.Reader
	// WatchCache reads the serving apiserver's watch cache instead of a consistent List: cheaper
	// for bursts of plans, but a Subscription committed a moment before can be missed.
	WatchCache bool
}

// Read names of olmguard_webhook_subscription_reads_total.
const (
	ReadConsistent = "consistent"
	ReadWatchCache = "watch-cache"
)

// Subscriptions lists the namespace's Subscriptions live. Without withInstallPlanRef it lists
// their metadata only, which the apiserver sends as protobuf and without the status (every
// catalog's health, the conditions): a smaller, faster answer (docs/performance.md).
func (l LiveSubscriptions) Subscriptions(ctx context.Context, namespace string, withInstallPlanRef bool) ([]Subscription, error) {
	opts := []client.ListOption{client.InNamespace(namespace)}
	read := ReadConsistent
	if l.WatchCache {
		opts, read = append(opts, fromWatchCache()), ReadWatchCache
	}
	subs, err := l.list(ctx, withInstallPlanRef, opts)
	if err == nil {
		metrics.SubscriptionReads.WithLabelValues(installPlansWebhook, read).Inc()
	}
	return subs, err
}

func (l LiveSubscriptions) list(ctx context.Context, withInstallPlanRef bool, opts []client.ListOption) ([]Subscription, error) {
	if withInstallPlanRef {
		list := &v1alpha1.SubscriptionList{}
		if err := l.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		return FromSubscriptions(list.Items), nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.SubscriptionKind + "List"))
	if err := l.Reader.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	out := make([]Subscription, 0, len(list.Items))
	for i := range list.Items {
		m := &list.Items[i]
		out = append(out, Subscription{Name: m.Name, UID: m.UID, Deleting: m.DeletionTimestamp != nil})
	}
	return out, nil
}

// fromWatchCache makes a List read the apiserver's watch cache (resourceVersion "0") instead of
// waiting for a consistent read. A new value each time: the client fills in the Raw options.
func fromWatchCache() client.ListOption {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}

// FromSubscriptions turns typed Subscriptions into the view the owner computation uses.
func FromSubscriptions(items []v1alpha1.Subscription) []Subscription {
	out := make([]Subscription, 0, len(items))
	for i := range items {
		s := &items[i]
		v := Subscription{Name: s.Name, UID: s.UID, Deleting: s.DeletionTimestamp != nil}
		if ref := s.Status.InstallPlanRef; ref != nil && (ref.Namespace == "" || ref.Namespace == s.Namespace) {
			v.InstallPlanRef, v.InstallPlanRefUID = ref.Name, ref.UID
		}
		out = append(out, v)
	}
	return out
}

// InstallPlanHandler serves /mutate/installplans: it merges into every plan the ownerReferences
// of the live Subscriptions it serves (F1, OLM issue #3199).
type InstallPlanHandler struct {
	Subscriptions SubscriptionLister
	// LookupTimeout bounds the Subscription lookup (default 2s; the webhook's own timeout is 3s).
	LookupTimeout time.Duration
}

const installPlansWebhook = "installplans"

// Handle answers one AdmissionReview.
func (h *InstallPlanHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != olm.InstallPlanKind || req.Kind.Group != olm.Group {
		return admission.Allowed("not an InstallPlan")
	}
	op := Operation(req.Operation)
	if op != Create && op != Update {
		return admission.Allowed("")
	}
	obj, err := review.DecodeMeta(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding InstallPlan: %w", err))
	}
	if obj.DeletionTimestamp != nil {
		return admission.Allowed("being deleted")
	}
	ns := obj.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	name := obj.Name
	if name == "" {
		name = req.Name
	}
	var oldRefs []metav1.OwnerReference
	if op == Update {
		old, err := review.DecodeMeta(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding old InstallPlan: %w", err))
		}
		oldRefs = old.OwnerReferences
	}
	timeout := h.LookupTimeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	subs, err := h.Subscriptions.Subscriptions(lctx, ns, op == Update)
	if err != nil {
		// Fail open: OLM's write goes through as it is and the controller repairs the plan.
		metrics.LookupErrors.WithLabelValues(installPlansWebhook).Inc()
		resp := admission.Allowed("")
		resp.Warnings = []string{"olmguard: could not list Subscriptions, ownerReferences left for the controller to repair: " + err.Error()}
		return resp
	}
	owners := InstallPlanOwners(op, name, obj.UID, oldRefs, subs)
	ops := OwnerReferencesPatch(obj.OwnerReferences, owners)
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	metrics.Mutations.WithLabelValues(installPlansWebhook).Inc()
	return admission.Patched("added Subscription ownerReferences", ops...)
}

var _ admission.Handler = &InstallPlanHandler{}
