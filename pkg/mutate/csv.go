package mutate

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gomodules.xyz/jsonpatch/v2"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
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

// csvBody is what F3 reads of a CSV: its metadata and status.reason.
type csvBody struct {
	*review.Meta
	Reason string
}

// For returns the handler of the endpoint that sends rules.
func (h CSVHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*csvBody]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.ClusterServiceVersionKind},
		Decode: csvMetaAndReason, OldOptional: true, Decide: h.decide}.For(rules)
}

func (CSVHandler) decide(_ context.Context, r admit.Request[*csvBody]) (admission.Response, error) {
	m := r.Object
	v := cleanup.CSVView{Namespace: m.Namespace, Labels: m.Labels, Annotations: m.Annotations, Finalizers: m.Finalizers, Deleting: m.DeletionTimestamp != nil, Reason: m.Reason}
	want := cleanup.WantsCleanupFinalizer(v)
	if r.Old != nil {
		// Judged from the old object too: labelling a CSV olm.copiedFrom while removing the
		// finalizer must not keep it off. An old object that cannot be read leaves the decision to
		// the new one.
		om := r.Old
		want = cleanup.WantsCleanupFinalizerOnUpdate(cleanup.CSVView{Namespace: m.Namespace, Labels: om.Labels, Annotations: om.Annotations,
			Finalizers: om.Finalizers, Reason: om.Reason}, v)
	}
	var ops []jsonpatch.Operation
	if want {
		ops = cleanup.AddFinalizerPatch(m.Finalizers, olmguard.CleanupFinalizer)
	}
	finalizing := len(ops) > 0
	// A finalized CSV labelled olm.copiedFrom is cached by the controller only with the tracking
	// label (issue 32): put it on in the same write.
	track := cleanup.TrackPatch(m.Labels, finalizing || cleanup.HasFinalizer(m.Finalizers))
	ops = append(ops, track...)
	if len(ops) == 0 {
		return admission.Allowed(""), nil
	}
	metrics.Mutations.WithLabelValues(csvsWebhook).Inc()
	var did []string
	if finalizing {
		did = append(did, "added the "+olmguard.CleanupFinalizer+" finalizer")
	}
	if len(track) > 0 {
		did = append(did, "labelled the CSV "+olmguard.CleanupTrackedLabel+" (it is labelled "+olm.CopiedFromLabel+" and holds the finalizer)")
	}
	return admission.Patched(strings.Join(did, "; "), ops...), nil
}

// csvMetaAndReason reads a CSV's metadata and status.reason, skipping everything else (icons,
// descriptions: up to megabytes) without parsing it.
func csvMetaAndReason(raw []byte) (*csvBody, error) {
	top, err := review.Fields(raw, "metadata", "status")
	if err != nil {
		return nil, err
	}
	metaRaw, ok := top["metadata"]
	if !ok || string(metaRaw) == "null" {
		return nil, errors.New("object has no metadata")
	}
	b := &csvBody{Meta: &review.Meta{}}
	if err := review.Decode(metaRaw, b.Meta); err != nil {
		return nil, err
	}
	if st, ok := top["status"]; ok && string(st) != "null" {
		fields, err := review.Fields(st, "reason")
		if err != nil {
			return nil, fmt.Errorf("status: %w", err)
		}
		if r, ok := fields["reason"]; ok && string(r) != "null" {
			if err := review.Decode(r, &b.Reason); err != nil {
				return nil, fmt.Errorf("status.reason: %w", err)
			}
		}
	}
	return b, nil
}
