package validate

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/review"
)

// DefaultCleanupUsers may remove olmguard.io/cleanup while a cleanup is pending: the controller's
// ServiceAccount in the default installation.
var DefaultCleanupUsers = []string{"system:serviceaccount:" + olmguard.DefaultNamespace + ":olmguard-controller"}

// CleanupFinalizerRemoval reports a violation when user removes olmguard.io/cleanup from a CSV
// whose cleanup is pending (it is being deleted; the webhook configuration sends only removals),
// unless the user runs the cleanup or the CSV opted out. Whether the CSV calls itself a copy plays
// no part (issue 31 item 7): olmguard never puts its finalizer on one of OLM's copies, and OLM sets
// olm.copiedFrom and status.reason Copied only on the copies it creates, so a CSV holding the
// finalizer is guarded whatever its labels, old or new, say.
func CleanupFinalizerRemoval(p Policies, user string, allowed []string, oldFinalizers, newFinalizers []string, deleting bool, annotations map[string]string) []Violation {
	if p.CleanupFinalizer == Off || !deleting || slices.Contains(allowed, user) || annotations[olmguard.CleanupAnnotation] == olmguard.CleanupDisabled {
		return nil
	}
	if !cleanup.HasFinalizer(oldFinalizers) || cleanup.HasFinalizer(newFinalizers) {
		return nil
	}
	return []Violation{{Policy: "cleanup-finalizer", Mode: p.CleanupFinalizer, Message: fmt.Sprintf(
		"%s may not remove %s while olmguard's cleanup is pending: wait for it, annotate the CSV %s=%s, or run `kubectl olmguard uninstall`",
		user, olmguard.CleanupFinalizer, olmguard.CleanupAnnotation, olmguard.CleanupDisabled)}}
}

// CSVHandler serves /validate/clusterserviceversions.
type CSVHandler struct {
	Policies Policies
	// CleanupUsers may remove the finalizer (default DefaultCleanupUsers).
	CleanupUsers []string
}

// For returns the handler of the endpoint that sends rules.
func (h *CSVHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*review.Meta]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.ClusterServiceVersionKind},
		Decode: review.DecodeMeta, Decide: h.decide}.For(rules)
}

// decide judges an update (the endpoint's rules send no other).
func (h *CSVHandler) decide(ctx context.Context, r admit.Request[*review.Meta]) (admission.Response, error) {
	obj, old := r.Object, r.Old
	users := h.CleanupUsers
	if users == nil {
		users = DefaultCleanupUsers
	}
	deleting := obj.DeletionTimestamp != nil || old.DeletionTimestamp != nil
	return Respond(ctx, CleanupFinalizerRemoval(h.Policies, r.UserInfo.Username, users, old.Finalizers, obj.Finalizers, deleting, obj.Annotations)), nil
}
