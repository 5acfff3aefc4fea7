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

// LiveSubscriptions lists Subscriptions from the apiserver on every call. The webhook must see a
// Subscription created milliseconds before the plan (the #3199 window), which its own informer
// cache does not guarantee.
//
// By default the List is served from the apiserver's watch cache (resourceVersion "0"). The
// Subscription OLM issue #3199 leaves out of a plan is one OLM's resolver had just listed with a
// consistent List before creating the plan (olm-facts.md §1.5). Kubernetes 1.31+ serves a
// consistent List from that same watch cache once it has caught up with etcd, so the cache already
// holds the Subscription when the plan arrives. A consistent List here (Consistent) costs up to
// 100 ms per plan on 1.31+, where it waits for the cache's progress notification
// (docs/performance.md). Before 1.31, or behind several apiservers, the cache can trail by a watch
// event's delivery; the controller repairs any plan either read misses.
type LiveSubscriptions struct {
	Reader     client.Reader
	Consistent bool
}

// Subscriptions lists the namespace's Subscriptions live. Without withInstallPlanRef it lists
// their metadata only, which the apiserver sends as protobuf and without the status (every
// catalog's health, the conditions): with 10 installed Subscriptions the lookup went from 5.4 to
// 1.8 ms at p50 (docs/performance.md).
func (l LiveSubscriptions) Subscriptions(ctx context.Context, namespace string, withInstallPlanRef bool) ([]Subscription, error) {
	opts := []client.ListOption{client.InNamespace(namespace)}
	if !l.Consistent {
		opts = append(opts, fromWatchCache())
	}
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
