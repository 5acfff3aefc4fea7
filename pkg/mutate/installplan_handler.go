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
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/review"
)

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
	op := owners.Operation(req.Operation)
	if op != owners.Create && op != owners.Update {
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
	if op == owners.Update {
		old, err := review.DecodeMeta(req.OldObject.Raw)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding old InstallPlan: %w", err))
		}
		oldRefs = old.OwnerReferences
	}
	// A CREATE needs names and UIDs only: OLM means a new plan to be owned by every
	// Subscription. An UPDATE also needs each status.installPlanRef.
	subs, err := h.Subscriptions.List(ctx, ns, op == owners.Create)
	if err != nil {
		return admit.LookupFailed(ctx, InstallPlansWebhook, "Subscriptions", "ownerReferences left for the controller to repair", err)
	}
	want := owners.InstallPlanOwners(op, name, obj.UID, oldRefs, owners.FromSubscriptions(subs))
	ops := owners.OwnerReferencesPatch(obj.OwnerReferences, want)
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	metrics.Mutations.WithLabelValues(InstallPlansWebhook).Inc()
	return admission.Patched("added Subscription ownerReferences", ops...)
}

var _ admission.Handler = &InstallPlanHandler{}
