package mutate

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/review"
)

const csvsWebhook = "clusterserviceversions"

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
	// Only metadata and status.reason are decoded; the rest (icons, descriptions: up to
	// megabytes) is skipped without being parsed.
	m, reason, err := csvMetaAndReason(req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding ClusterServiceVersion: %w", err))
	}
	ns := m.Namespace
	if ns == "" {
		ns = req.Namespace
	}
	v := cleanup.CSVView{Namespace: ns, Labels: m.Labels, Annotations: m.Annotations, Finalizers: m.Finalizers, Deleting: m.DeletionTimestamp != nil, Reason: reason}
	want := cleanup.WantsCleanupFinalizer(v)
	if req.Operation == "UPDATE" && len(req.OldObject.Raw) > 0 {
		// Judged from the old object too: labelling a CSV olm.copiedFrom while removing the
		// finalizer must not keep it off. An old object that cannot be read leaves the decision to
		// the new one.
		if om, oldReason, err := csvMetaAndReason(req.OldObject.Raw); err == nil {
			want = cleanup.WantsCleanupFinalizerOnUpdate(cleanup.CSVView{Namespace: ns, Labels: om.Labels, Annotations: om.Annotations,
				Finalizers: om.Finalizers, Reason: oldReason}, v)
		}
	}
	if !want {
		return admission.Allowed("")
	}
	ops := cleanup.AddFinalizerPatch(m.Finalizers, olmguard.CleanupFinalizer)
	if len(ops) == 0 {
		return admission.Allowed("")
	}
	metrics.Mutations.WithLabelValues(csvsWebhook).Inc()
	return admission.Patched("added the olmguard.io/cleanup finalizer", ops...)
}

// csvMetaAndReason reads a CSV's metadata and status.reason, skipping everything else.
func csvMetaAndReason(raw []byte) (*review.Meta, string, error) {
	top, err := review.Fields(raw, "metadata", "status")
	if err != nil {
		return nil, "", err
	}
	metaRaw, ok := top["metadata"]
	if !ok || string(metaRaw) == "null" {
		return nil, "", errors.New("object has no metadata")
	}
	m := &review.Meta{}
	if err := review.Decode(metaRaw, m); err != nil {
		return nil, "", err
	}
	var reason string
	if st, ok := top["status"]; ok && string(st) != "null" {
		fields, err := review.Fields(st, "reason")
		if err != nil {
			return nil, "", fmt.Errorf("status: %w", err)
		}
		if r, ok := fields["reason"]; ok && string(r) != "null" {
			if err := review.Decode(r, &reason); err != nil {
				return nil, "", fmt.Errorf("status.reason: %w", err)
			}
		}
	}
	return m, reason, nil
}
