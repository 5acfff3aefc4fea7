package mutate

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/review"
)

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
	Subscriptions admit.Subscriptions
}

// InstallPlansWebhook labels this handler's metrics.
const InstallPlansWebhook = "installplans"

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
	// A CREATE needs names and UIDs only: OLM means a new plan to be owned by every
	// Subscription. An UPDATE also needs each status.installPlanRef.
	subs, err := h.Subscriptions.List(ctx, ns, op == Create)
	if err != nil {
		return admit.LookupFailed(ctx, InstallPlansWebhook, "Subscriptions", "ownerReferences left for the controller to repair", err)
	}
	owners := InstallPlanOwners(op, name, obj.UID, oldRefs, FromSubscriptions(subs))
	ops := OwnerReferencesPatch(obj.OwnerReferences, owners)
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	metrics.Mutations.WithLabelValues(InstallPlansWebhook).Inc()
	return admission.Patched("added Subscription ownerReferences", ops...)
}

var _ admission.Handler = &InstallPlanHandler{}
