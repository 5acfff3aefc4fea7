package mutate

import (
	"context"
	"fmt"
	"net/http"
	"time"

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

// Handle answers one AdmissionReview.
func (h *JobHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != "Job" || req.Kind.Group != "batch" {
		return admission.Allowed("not a Job")
	}
	if req.Operation != "CREATE" {
		return admission.Allowed("")
	}
	// One pass over the body for both metadata and spec.ttlSecondsAfterFinished.
	var body struct {
		Metadata *review.Meta `json:"metadata"`
		Spec     *struct {
			TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished"`
		} `json:"spec"`
	}
	if err := review.Decode(req.Object.Raw, &body); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding Job: %w", err))
	}
	if body.Metadata == nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding Job: object has no metadata"))
	}
	if body.Spec == nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding Job: object has no spec"))
	}
	meta := body.Metadata
	ns := meta.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	ops := unpack.RenamePatch(unpack.Job{Namespace: ns, Name: meta.Name, GenerateName: meta.GenerateName, Labels: meta.Labels,
		OwnerReferences: meta.OwnerReferences, HasTTL: body.Spec.TTLSecondsAfterFinished != nil}, int32(h.TTL/time.Second))
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	if h.Catalogs == nil {
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("no CatalogSource lookup configured"))
	}
	switch ok, err := h.Catalogs.HasCatalogSource(ctx, ns); {
	case err != nil:
		return admit.LookupFailed(ctx, JobsWebhook, "CatalogSources in "+ns, "unpack Job left as OLM named it", err)
	case !ok:
		return admission.Allowed("no CatalogSource in " + ns + ": not an OLM unpack Job")
	}
	metrics.Mutations.WithLabelValues(JobsWebhook).Inc()
	return admission.Patched("namespace-scoped unpack Job name (OLM issue #3210)", ops...)
}
