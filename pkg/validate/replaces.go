package validate

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/replaces"
	"github.com/olmguard/olmguard/pkg/review"
)

// ReplacesCyclePolicy names the replaces-cycle guard (--policy-replaces-cycle) in
// olmguard_webhook_policy_violations_total.
const ReplacesCyclePolicy = "replaces-cycle"

// CSVReplacesWebhook labels the replaces-cycle handler's lookup metrics.
const CSVReplacesWebhook = "validate-csv-replaces"

// ReplacesCyclePolicies checks a CSV whose spec.replaces chain (replaces.Walk) comes back to it:
// cycle is that chain, nil when there is none. OLM v0.25-v0.46 and OpenShift 4.16-4.20 spin
// olm-operator on such a CSV wherever it reports ClusterOperator status (OCPBUGS-23954).
func ReplacesCyclePolicies(p Policies, namespace string, cycle []string) []Violation {
	if !p.ReplacesCycle.active() || len(cycle) == 0 {
		return nil
	}
	what := fmt.Sprintf("CSV %s in namespace %s replaces itself", cycle[0], namespace)
	if len(cycle) > 1 {
		what = fmt.Sprintf("CSV %s in namespace %s closes a spec.replaces cycle (%s)", cycle[0], namespace, replaces.Describe(cycle))
	}
	return []Violation{{Policy: ReplacesCyclePolicy, Mode: p.ReplacesCycle, Message: fmt.Sprintf(
		"%s: olm-operator, where it reports ClusterOperator status (as on OpenShift), then loops at 100%% CPU until it restarts, and deleting the CSV does not stop it (%s); "+
			"set spec.replaces to the CSV this one really replaces, or leave it out. If such a CSV is already in the cluster: %s",
		what, replaces.Reference, replaces.Recovery)}}
}

// CSVReplacesHandler serves /validate/clusterserviceversions-replaces: a CSV created, or updated
// with a new spec.replaces, whose replaces chain through its namespace's CSVs comes back to it
// (OCPBUGS-23954). OLM writes spec.replaces once, when it creates the CSV from its InstallPlan
// step (olm-facts.md §8 N1); every other update (OLM's finalizer, annotations, status) is
// admitted unread.
type CSVReplacesHandler struct {
	// CSVs reads the CSVs of the request's namespace, one link of the chain at a time.
	CSVs     admit.CSVReplaces
	Policies Policies
}

// csvReplacesBody is what the guard reads of a CSV: its metadata, spec.replaces and
// status.reason (OLM's copies carry Copied). The rest of a body of megabytes is skipped.
type csvReplacesBody struct {
	Metadata *review.Meta `json:"metadata"`
	Spec     struct {
		Replaces string `json:"replaces"`
	} `json:"spec"`
	Status struct {
		Reason string `json:"reason"`
	} `json:"status"`
}

func (b *csvReplacesBody) GetNamespace() string   { return b.Metadata.Namespace }
func (b *csvReplacesBody) SetNamespace(ns string) { b.Metadata.Namespace = ns }

// copied is OLM's rule for its copies (olm.IsCopiedCSV): OLM's walk skips them.
func (b *csvReplacesBody) copied() bool {
	return olm.IsCopiedCSV(b.Metadata.Namespace, b.Metadata.Labels, b.Metadata.Annotations, b.Status.Reason)
}

// For returns the handler of the endpoint that sends rules.
func (h *CSVReplacesHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*csvReplacesBody]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.ClusterServiceVersionKind},
		Decode: decodeBody[csvReplacesBody], Active: func() bool { return h.Policies.ReplacesCycle.active() }, Decide: h.decide}.For(rules)
}

func (h *CSVReplacesHandler) decide(ctx context.Context, r admit.Request[*csvReplacesBody]) (admission.Response, error) {
	csv := r.Object
	if csv.copied() || csv.Spec.Replaces == "" {
		return admission.Allowed(""), nil // not in OLM's walk, or replaces nothing
	}
	if r.Operation == admissionv1.Update && r.Old.Spec.Replaces == csv.Spec.Replaces && !r.Old.copied() {
		return admission.Allowed(""), nil // OLM's own updates: finalizers, annotations; a CSV already in a cycle is doctor's
	}
	ns := csv.Metadata.Namespace
	ctx, cancel := context.WithTimeout(ctx, admit.DefaultLookupTimeout)
	defer cancel()
	res, err := replaces.Walk(csv.Metadata.Name, csv.Spec.Replaces, func(name string) (string, bool, error) {
		return h.CSVs.Replaces(ctx, ns, name) // only the request's namespace
	})
	if err == nil && res.Undecided {
		err = fmt.Errorf("%w: its spec.replaces chain is longer than %d CSVs", admit.ErrCapped, replaces.MaxWalk)
	}
	if err != nil {
		return admit.LookupFailed(ctx, CSVReplacesWebhook, "ClusterServiceVersions", "replaces cycle not checked", err), nil
	}
	return Respond(ctx, ReplacesCyclePolicies(h.Policies, ns, res.Cycle)), nil
}
