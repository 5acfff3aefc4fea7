package mutate

import (
	"context"
	"errors"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/review"
	"github.com/olmguard/olmguard/pkg/unpack"
)

// JobsWebhook labels this handler's metrics.
const JobsWebhook = "jobs"

// JobHandler serves /mutate/jobs: OLM's unpack Jobs get a namespace-scoped name and a TTL (F4,
// OLM issue #3210).
type JobHandler struct {
	// TTL is given to finished unpack Jobs OLM left without one (--unpack-job-default-ttl).
	TTL time.Duration
	// Catalogs tells whether a namespace holds a CatalogSource. OLM creates unpack Jobs only in
	// the CatalogSource's namespace, so a look-alike Job anywhere else is a tenant's and is left
	// as written.
	Catalogs admit.CatalogNamespaces
}

// jobBody is what F4 reads of a Job: its metadata and whether spec.ttlSecondsAfterFinished is set.
type jobBody struct {
	Metadata *review.Meta
	HasTTL   bool
}

func (b *jobBody) GetNamespace() string   { return b.Metadata.Namespace }
func (b *jobBody) SetNamespace(ns string) { b.Metadata.Namespace = ns }

// decodeJob reads metadata and spec.ttlSecondsAfterFinished in one pass over the body.
func decodeJob(raw []byte) (*jobBody, error) {
	var body struct {
		Metadata *review.Meta `json:"metadata"`
		Spec     *struct {
			TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished"`
		} `json:"spec"`
	}
	if err := review.Decode(raw, &body); err != nil {
		return nil, err
	}
	if body.Metadata == nil {
		return nil, errors.New("object has no metadata")
	}
	if body.Spec == nil {
		return nil, errors.New("object has no spec")
	}
	return &jobBody{Metadata: body.Metadata, HasTTL: body.Spec.TTLSecondsAfterFinished != nil}, nil
}

// For returns the handler of the endpoint that sends rules.
func (h *JobHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*jobBody]{Kind: schema.GroupKind{Group: "batch", Kind: "Job"}, Decode: decodeJob, Decide: h.decide}.For(rules)
}

func (h *JobHandler) decide(ctx context.Context, r admit.Request[*jobBody]) (admission.Response, error) {
	meta := r.Object.Metadata
	ns := meta.Namespace
	ops := unpack.RenamePatch(unpack.Job{Namespace: ns, Name: meta.Name, GenerateName: meta.GenerateName, Labels: meta.Labels,
		OwnerReferences: meta.OwnerReferences, HasTTL: r.Object.HasTTL}, int32(h.TTL/time.Second))
	if len(ops) == 0 {
		return admission.Allowed(""), nil
	}
	if h.Catalogs == nil {
		return admission.Response{}, errors.New("no CatalogSource lookup configured")
	}
	switch ok, err := h.Catalogs.HasCatalogSource(ctx, ns); {
	case err != nil:
		return admit.LookupFailed(ctx, JobsWebhook, "CatalogSources in "+ns, "unpack Job left as OLM named it", err), nil
	case !ok:
		return admission.Allowed("no CatalogSource in " + ns + ": not an OLM unpack Job"), nil
	}
	metrics.Mutations.WithLabelValues(JobsWebhook).Inc()
	return admission.Patched("namespace-scoped unpack Job name (OLM issue #3210)", ops...), nil
}
