package mutate

import (
	"context"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/review"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
)

// WebhookProbeWebhook labels this handler's metrics.
const WebhookProbeWebhook = "webhook-probe"

// WebhookProbeHandler serves /mutate/webhook-probe: it marks the dry-run ConfigMap of the
// reachability probe (pkg/webhookprobe), in olmguard's own namespace only, so that the
// controller and doctor can see the kube-apiserver calls the webhook.
type WebhookProbeHandler struct {
	// Namespace is olmguard's (the webhook's --namespace): the only one whose probes it answers.
	Namespace string
}

// For returns the handler of the endpoint that sends rules.
func (h WebhookProbeHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*review.Meta]{Kind: schema.GroupKind{Kind: "ConfigMap"},
		Decode: review.DecodeMeta, Decide: h.decide}.For(rules)
}

func (h WebhookProbeHandler) decide(_ context.Context, r admit.Request[*review.Meta]) (admission.Response, error) {
	dryRun := r.DryRun != nil && *r.DryRun
	// The request's namespace is the kube-apiserver's; an object naming another is not answered.
	ns := r.Namespace
	nonce, ok := webhookprobe.Answer(webhookprobe.Request{Namespace: ns, Own: h.Namespace, DryRun: dryRun, Labels: r.Object.Labels})
	if !ok || r.Object.Namespace != ns {
		return admission.Allowed(""), nil
	}
	ops := webhookprobe.AnswerPatch(r.Object.Annotations, nonce)
	if len(ops) == 0 {
		return admission.Allowed(""), nil
	}
	metrics.Mutations.WithLabelValues(WebhookProbeWebhook).Inc()
	return admission.Patched("olmguard's webhook was called", ops...), nil
}
