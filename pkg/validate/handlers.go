package validate

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/review"
)

// Metric labels of the validating handlers.
const (
	SubscriptionsWebhook = "validate-subscriptions"
	InstallPlansWebhook  = "validate-installplans"
)

// SubscriptionHandler serves /validate/subscriptions: duplicate packages and mixed approval.
type SubscriptionHandler struct {
	Subscriptions admit.Subscriptions
	Policies      Policies
}

// Handle answers one AdmissionReview.
func (h *SubscriptionHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != olm.SubscriptionKind || req.Kind.Group != olm.Group {
		return admission.Allowed("not a Subscription")
	}
	if req.Operation != "CREATE" && req.Operation != "UPDATE" {
		return admission.Allowed("")
	}
	sub := &v1alpha1.Subscription{}
	if err := decodeObject(req.Object.Raw, sub); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding Subscription: %w", err))
	}
	if req.Operation == "UPDATE" {
		old := &v1alpha1.Subscription{}
		if err := decodeObject(req.OldObject.Raw, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding old Subscription: %w", err))
		}
		if old.Spec.Package == sub.Spec.Package && approvalOf(old) == approvalOf(sub) {
			return admission.Allowed("") // nothing the policies look at changed
		}
	}
	if sub.Namespace == "" {
		sub.Namespace = req.Namespace
	}
	others, err := h.Subscriptions.List(ctx, sub.Namespace, false)
	if err != nil {
		return admit.LookupFailed(ctx, SubscriptionsWebhook, "Subscriptions", "policies not checked", err)
	}
	return Respond(SubscriptionPolicies(h.Policies, sub, others))
}

// decodeObject decodes a whole (small) object and requires its metadata.
func decodeObject(raw []byte, into client.Object) error {
	if _, err := review.DecodeMeta(raw); err != nil {
		return err
	}
	return review.Decode(raw, into)
}

// InstallPlanHandler serves /validate/installplans: an update must not drop a live
// Subscription's ownerReference.
type InstallPlanHandler struct {
	Subscriptions admit.Subscriptions
	Policies      Policies
}

// Handle answers one AdmissionReview.
func (h *InstallPlanHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != olm.InstallPlanKind || req.Kind.Group != olm.Group {
		return admission.Allowed("not an InstallPlan")
	}
	if req.Operation != "UPDATE" || h.Policies.InstallPlanOwnerDrop == Off {
		return admission.Allowed("")
	}
	obj, err := review.DecodeMeta(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding InstallPlan: %w", err))
	}
	old, err := review.DecodeMeta(req.OldObject.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding old InstallPlan: %w", err))
	}
	if !dropsSubscriptionRef(old.OwnerReferences, obj.OwnerReferences) {
		return admission.Allowed("")
	}
	ns := obj.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	subs, err := h.Subscriptions.List(ctx, ns, true)
	if err != nil {
		return admit.LookupFailed(ctx, InstallPlansWebhook, "Subscriptions", "policies not checked", err)
	}
	live := map[string]types.UID{}
	for _, s := range subs {
		if s.DeletionTimestamp == nil {
			live[s.Name] = s.UID
		}
	}
	return Respond(InstallPlanPolicies(h.Policies, obj.Name, old.OwnerReferences, obj.OwnerReferences, live))
}

// dropsSubscriptionRef is the cheap pre-check that spares the lookup on most updates: it treats
// every Subscription the old object referenced as live.
func dropsSubscriptionRef(oldRefs, newRefs []metav1.OwnerReference) bool {
	all := map[string]types.UID{}
	for _, r := range oldRefs {
		all[r.Name] = r.UID
	}
	return len(owners.DroppedOwners(oldRefs, newRefs, all)) > 0
}
