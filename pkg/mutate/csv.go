package mutate

import (
	"context"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/review"
)

const csvsWebhook = "clusterserviceversions"

// CSVView is what the cleanup finalizer decision reads of a CSV.
type CSVView struct {
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	Finalizers  []string
	Deleting    bool
	// Reason is status.reason ("Copied" on copies).
	Reason string
}

// Copied is OLM's IsCopied on the view.
func (c CSVView) Copied() bool {
	if c.Reason == "Copied" {
		return true
	}
	if ns, ok := c.Annotations[olm.OperatorNamespaceAnnotation]; ok && ns != c.Namespace {
		return true
	}
	_, ok := c.Labels[olm.CopiedFromLabel]
	return ok
}

// WantsCleanupFinalizer reports whether a CSV should carry olmguard.io/cleanup: every CSV that is
// not a copy (copies own nothing), not being deleted, and not opted out.
func WantsCleanupFinalizer(c CSVView) bool {
	return !c.Copied() && !c.Deleting && c.Annotations[olmguard.CleanupAnnotation] != olmguard.CleanupDisabled
}

// CSVHandler serves /mutate/clusterserviceversions: it appends olmguard's cleanup finalizer (F3).
// Only metadata and status.reason are decoded: CSVs can be megabytes.
type CSVHandler struct{}

// Handle answers one AdmissionReview.
func (CSVHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Kind != olm.ClusterServiceVersionKind || req.Kind.Group != olm.Group {
		return admission.Allowed("not a ClusterServiceVersion")
	}
	if req.Operation != "CREATE" && req.Operation != "UPDATE" {
		return admission.Allowed("")
	}
	var body struct {
		Metadata *review.Meta `json:"metadata"`
		Status   struct {
			Reason string `json:"reason"`
		} `json:"status"`
	}
	if err := review.Decode(req.Object.Raw, &body); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding ClusterServiceVersion: %w", err))
	}
	if body.Metadata == nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding ClusterServiceVersion: object has no metadata"))
	}
	m := body.Metadata
	ns := m.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	v := CSVView{Namespace: ns, Labels: m.Labels, Annotations: m.Annotations, Finalizers: m.Finalizers, Deleting: m.DeletionTimestamp != nil, Reason: body.Status.Reason}
	if !WantsCleanupFinalizer(v) {
		return admission.Allowed("")
	}
	ops := AddFinalizerPatch(m.Finalizers, olmguard.CleanupFinalizer)
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	metrics.Mutations.WithLabelValues(csvsWebhook).Inc()
	return admission.Patched("added the olmguard.io/cleanup finalizer", ops...)
}
