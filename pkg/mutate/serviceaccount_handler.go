package mutate

import (
	"context"
	"errors"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/review"
	"github.com/olmguard/olmguard/pkg/serviceaccounts"
)

// ServiceAccountsWebhook labels this handler's metrics.
const ServiceAccountsWebhook = "serviceaccounts"

// ServiceAccountHandler serves /mutate/serviceaccounts: when OLM's catalog-operator rewrites an
// operator's ServiceAccount on an InstallPlan step (every upgrade), what the user put on it and
// OLM's write drops (annotations before OLM v0.33, OLM #3607; labels, imagePullSecrets and
// automountServiceAccountToken still at v0.46.0) is put back. Only OLM's own updates are corrected.
type ServiceAccountHandler struct {
	// OLMUsers are OLM's identities (--olm-users; nil: serviceaccounts.DefaultOLMUsers).
	OLMUsers []string
	// Disabled turns the restore off (--restore-serviceaccount-metadata=false): every request is
	// admitted unread.
	Disabled bool
}

// serviceAccountBody is what the restore reads of a ServiceAccount: its metadata,
// imagePullSecrets and automountServiceAccountToken (secrets are OLM's to keep).
type serviceAccountBody struct {
	Metadata         *review.Meta                  `json:"metadata"`
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets"`
	AutomountToken   *bool                         `json:"automountServiceAccountToken"`
}

func (b *serviceAccountBody) GetNamespace() string   { return b.Metadata.Namespace }
func (b *serviceAccountBody) SetNamespace(ns string) { b.Metadata.Namespace = ns }

func (b *serviceAccountBody) view() serviceaccounts.View {
	return serviceaccounts.View{Labels: b.Metadata.Labels, Annotations: b.Metadata.Annotations, OwnerReferences: b.Metadata.OwnerReferences,
		ImagePullSecrets: b.ImagePullSecrets, AutomountToken: b.AutomountToken}
}

func decodeServiceAccount(raw []byte) (*serviceAccountBody, error) {
	var b serviceAccountBody
	if err := review.Decode(raw, &b); err != nil {
		return nil, err
	}
	if b.Metadata == nil {
		return nil, errors.New("object has no metadata")
	}
	return &b, nil
}

// For returns the handler of the endpoint that sends rules.
func (h *ServiceAccountHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*serviceAccountBody]{Kind: schema.GroupKind{Group: "", Kind: olm.ServiceAccountKind}, Decode: decodeServiceAccount,
		Active: func() bool { return !h.Disabled }, Decide: h.decide}.For(rules)
}

func (h *ServiceAccountHandler) decide(ctx context.Context, r admit.Request[*serviceAccountBody]) (admission.Response, error) {
	users := h.OLMUsers
	if users == nil {
		users = serviceaccounts.DefaultOLMUsers()
	}
	// The webhook configuration's match condition sends only requests of a ServiceAccount named
	// like OLM's; the exact identity is checked here, against --olm-users.
	if r.Old == nil || !serviceaccounts.IsOLMUser(r.UserInfo.Username, users) {
		return admission.Allowed(""), nil
	}
	old, obj := r.Old.view(), r.Object.view()
	if !serviceaccounts.StepWrite(old, obj) {
		return admission.Allowed(""), nil
	}
	restore := serviceaccounts.RestorePatch(old, obj)
	if restore.Empty() {
		return admission.Allowed(""), nil
	}
	lg := log.FromContext(ctx)
	if restore.Capped {
		lg.Info("ServiceAccount restore capped: some of what OLM dropped stays dropped", "annotations", len(restore.Annotations),
			"labels", len(restore.Labels), "imagePullSecrets", len(restore.PullSecrets))
	}
	lg.V(1).Info("restoring what OLM's ServiceAccount step dropped (OLM #3607)", "annotations", len(restore.Annotations),
		"labels", len(restore.Labels), "imagePullSecrets", len(restore.PullSecrets), "automountServiceAccountToken", restore.Automount)
	metrics.Mutations.WithLabelValues(ServiceAccountsWebhook).Inc()
	return admission.Patched("kept the ServiceAccount's annotations, labels and imagePullSecrets OLM's step dropped (OLM issue #3607)", restore.Patch...), nil
}
