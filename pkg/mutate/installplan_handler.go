package mutate

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// For returns the handler of the endpoint that sends rules.
func (h *InstallPlanHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*review.Meta]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.InstallPlanKind},
		// The old object is needed only for a plan not being deleted.
		Decode: review.DecodeMeta, OldOptional: true, Decide: h.decide}.For(rules)
}

func (h *InstallPlanHandler) decide(ctx context.Context, r admit.Request[*review.Meta]) (admission.Response, error) {
	obj, op := r.Object, owners.Operation(r.Operation)
	if obj.DeletionTimestamp != nil {
		return admission.Allowed("being deleted"), nil
	}
	name := obj.Name
	if name == "" {
		name = r.Name
	}
	var oldRefs []metav1.OwnerReference
	if op == owners.Update {
		if r.OldErr != nil {
			return admission.Response{}, r.OldErr
		}
		oldRefs = r.Old.OwnerReferences
	}
	// A CREATE needs names and UIDs only: OLM means a new plan to be owned by every
	// Subscription. An UPDATE also needs each status.installPlanRef.
	subs, err := h.Subscriptions.List(ctx, obj.Namespace, op == owners.Create)
	if err != nil {
		return admit.LookupFailed(ctx, InstallPlansWebhook, "Subscriptions", "ownerReferences left for the controller to repair", err), nil
	}
	want := owners.InstallPlanOwners(op, name, obj.UID, oldRefs, owners.FromSubscriptions(subs))
	ops := owners.OwnerReferencesPatch(obj.OwnerReferences, want)
	if len(ops) == 0 {
		return admission.Allowed(""), nil
	}
	metrics.Mutations.WithLabelValues(InstallPlansWebhook).Inc()
	return admission.Patched("added Subscription ownerReferences", ops...), nil
}

var _ admit.Decider = &InstallPlanHandler{}
