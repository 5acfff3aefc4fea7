package validate

import (
	"context"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm"
	v1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/review"
)

// Metric labels of the validating handlers.
const (
	SubscriptionsWebhook    = "validate-subscriptions"
	InstallPlansWebhook     = "validate-installplans"
	OperatorGroupsWebhook   = "validate-operatorgroups"
	operatorGroupsUnchecked = "OperatorGroup checks not done"
)

// SubscriptionHandler serves /validate/subscriptions: duplicate packages and mixed approval; on a
// create, whether the namespace has an OperatorGroup; on a create or a change of its catalog,
// whether the catalog is trusted.
type SubscriptionHandler struct {
	Subscriptions admit.Subscriptions
	// OperatorGroups, when set, is read on a create for the OperatorGroup guard.
	OperatorGroups admit.OperatorGroups
	// CatalogSources, when set, is read for catalog trust, which Trusted configures.
	CatalogSources admit.CatalogSources
	Trusted        TrustedCatalogs
	Policies       Policies
}

// For returns the handler of the endpoint that sends rules.
func (h *SubscriptionHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*v1alpha1.Subscription]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.SubscriptionKind},
		Decode: decodeObject[v1alpha1.Subscription], Decide: h.decide}.For(rules)
}

func (h *SubscriptionHandler) decide(ctx context.Context, r admit.Request[*v1alpha1.Subscription]) (admission.Response, error) {
	sub := r.Object
	checkOthers, checkCatalog := true, h.CatalogSources != nil && h.Policies.CatalogTrust.active()
	if r.Operation == admissionv1.Update {
		old := r.Old
		checkOthers = old.Spec.Package != sub.Spec.Package || approvalOf(old) != approvalOf(sub)
		checkCatalog = checkCatalog && (old.Spec.CatalogSource != sub.Spec.CatalogSource || SourceNamespace(old) != SourceNamespace(sub))
	}
	var violations []Violation
	var failed []admission.Response
	if checkOthers {
		v, f := h.namespacePolicies(ctx, r.Operation, sub)
		violations, failed = append(violations, v...), append(failed, f...)
	}
	if checkCatalog {
		v, f := h.catalogPolicies(ctx, sub)
		violations, failed = append(violations, v...), append(failed, f...)
	}
	return respondDespite(ctx, violations, failed...), nil
}

// namespacePolicies checks sub against the namespace's other Subscriptions and, on a create, its
// OperatorGroups.
func (h *SubscriptionHandler) namespacePolicies(ctx context.Context, op admissionv1.Operation, sub *v1alpha1.Subscription) ([]Violation, []admission.Response) {
	others, err := h.Subscriptions.List(ctx, sub.Namespace, false)
	if err != nil {
		return nil, []admission.Response{admit.LookupFailed(ctx, SubscriptionsWebhook, "Subscriptions", "policies not checked", err)}
	}
	violations := SubscriptionPolicies(h.Policies, sub, others)
	if op != admissionv1.Create || h.OperatorGroups == nil || h.Policies.OperatorGroups == Off {
		return violations, nil
	}
	groups, err := h.OperatorGroups.List(ctx, sub.Namespace)
	if err != nil {
		return violations, []admission.Response{admit.LookupFailed(ctx, SubscriptionsWebhook, "OperatorGroups", operatorGroupsUnchecked, err)}
	}
	return append(violations, SubscriptionWithoutOperatorGroup(h.Policies, sub, groups)...), nil
}

// catalogPolicies checks the catalog sub installs from; a trusted namespace needs no lookup.
func (h *SubscriptionHandler) catalogPolicies(ctx context.Context, sub *v1alpha1.Subscription) ([]Violation, []admission.Response) {
	ns := SourceNamespace(sub)
	var catalog *Catalog
	if !h.Trusted.NamespaceTrusted(ns) && sub.Spec.CatalogSource != "" {
		cs, err := h.CatalogSources.Get(ctx, ns, sub.Spec.CatalogSource)
		if err != nil {
			return nil, []admission.Response{admit.LookupFailed(ctx, SubscriptionsWebhook, "CatalogSources", "catalog trust not checked", err)}
		}
		if cs != nil {
			c := CatalogOf(cs)
			catalog = &c
		}
	}
	return SubscriptionCatalogPolicies(h.Policies, h.Trusted, sub, catalog), nil
}

// respondDespite answers violations found before a lookup failed, with the failures' warnings:
// one failed lookup does not drop what the others found.
func respondDespite(ctx context.Context, violations []Violation, failed ...admission.Response) admission.Response {
	resp := Respond(ctx, violations)
	for _, f := range failed {
		resp.Warnings = append(resp.Warnings, f.Warnings...)
	}
	return resp
}

// CatalogSourceHandler serves /validate/catalogsources: catalog trust (OLM #3820).
type CatalogSourceHandler struct {
	Trusted  TrustedCatalogs
	Policies Policies
}

// catalogSourceBody is what catalog trust reads of a CatalogSource: what it serves. Its status
// is written through the status subresource, which is never sent.
type catalogSourceBody struct {
	Metadata *review.Meta `json:"metadata"`
	Spec     struct {
		SourceType v1alpha1.SourceType `json:"sourceType"`
		Image      string              `json:"image"`
		Address    string              `json:"address"`
		ConfigMap  string              `json:"configMap"`
	} `json:"spec"`
}

func (b *catalogSourceBody) GetNamespace() string   { return b.Metadata.Namespace }
func (b *catalogSourceBody) SetNamespace(ns string) { b.Metadata.Namespace = ns }

// For returns the handler of the endpoint that sends rules.
func (h *CatalogSourceHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*catalogSourceBody]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.CatalogSourceKind},
		Decode: decodeBody[catalogSourceBody], Active: func() bool { return h.Policies.CatalogTrust.active() }, Decide: h.decide}.For(rules)
}

func (h *CatalogSourceHandler) decide(ctx context.Context, r admit.Request[*catalogSourceBody]) (admission.Response, error) {
	cs := r.Object
	if r.Operation == admissionv1.Update && r.Old.Spec == cs.Spec {
		return admission.Allowed(""), nil // what it serves is unchanged: OLM's and others' metadata writes
	}
	c := Catalog{Namespace: cs.Metadata.Namespace, Name: cs.Metadata.Name, SourceType: cs.Spec.SourceType, Image: cs.Spec.Image, Address: cs.Spec.Address}
	if c.Name == "" {
		c.Name = cs.Metadata.GenerateName + "<generated>"
	}
	return Respond(ctx, CatalogSourcePolicies(h.Policies, h.Trusted, c)), nil
}

// OperatorGroupHandler serves /validate/operatorgroups: a second OperatorGroup in a namespace,
// and target namespaces that do not exist.
type OperatorGroupHandler struct {
	OperatorGroups admit.OperatorGroups
	Namespaces     admit.Namespaces
	Policies       Policies
}

// For returns the handler of the endpoint that sends rules.
func (h *OperatorGroupHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*v1.OperatorGroup]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.OperatorGroupKind},
		Decode: decodeObject[v1.OperatorGroup], Active: func() bool { return h.Policies.OperatorGroups != Off }, Decide: h.decide}.For(rules)
}

func (h *OperatorGroupHandler) decide(ctx context.Context, r admit.Request[*v1.OperatorGroup]) (admission.Response, error) {
	og := r.Object
	ns, name := og.Namespace, og.Name
	if name == "" {
		name = og.GenerateName + "<generated>"
	}
	var others []metav1.ObjectMeta
	if r.Operation == admissionv1.Update {
		if slices.Equal(r.Old.Spec.TargetNamespaces, og.Spec.TargetNamespaces) {
			return admission.Allowed(""), nil // OLM's own updates (annotations) change no target
		}
	} else {
		var err error
		if others, err = h.OperatorGroups.List(ctx, ns); err != nil {
			return admit.LookupFailed(ctx, OperatorGroupsWebhook, "OperatorGroups", operatorGroupsUnchecked, err), nil
		}
	}
	targets := targetNames(og.Spec.TargetNamespaces)
	if len(targets) == 0 {
		return Respond(ctx, OperatorGroupPolicies(h.Policies, name, ns, others, nil)), nil
	}
	missing, err := h.Namespaces.Missing(ctx, targets)
	if err != nil {
		return respondDespite(ctx, OperatorGroupPolicies(h.Policies, name, ns, others, nil),
			admit.LookupFailed(ctx, OperatorGroupsWebhook, "Namespaces", "target namespaces not checked", err)), nil
	}
	return Respond(ctx, OperatorGroupPolicies(h.Policies, name, ns, others, missing)), nil
}

// maxTargetLookups bounds the Namespace GETs of one request: an OperatorGroup names a few target
// namespaces, and a body of megabytes naming a million must not cost a million GETs.
const maxTargetLookups = 100

// targetNames are the first maxTargetLookups distinct non-empty names of targetNamespaces, in order.
func targetNames(targets []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range targets {
		if t != "" && !seen[t] && len(out) < maxTargetLookups {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// decodeBody decodes an object, or the part of it a handler reads, into a new T once its metadata
// decoded: every handler gives the same clear errors for a body that is empty, malformed or has
// no metadata (review.DecodeMeta), and T's metadata, read from the same bytes, is then set.
func decodeBody[T any](raw []byte) (*T, error) {
	if _, err := review.DecodeMeta(raw); err != nil {
		return nil, err
	}
	v := new(T)
	if err := review.Decode(raw, v); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeObject decodes a whole (small) object and requires its metadata.
func decodeObject[T any, PT interface {
	*T
	client.Object
}](raw []byte) (PT, error) {
	obj, err := decodeBody[T](raw)
	return PT(obj), err
}

// InstallPlanHandler serves /validate/installplans: an update must not drop a live
// Subscription's ownerReference, and an approval must be of the newest plan and upgrade no Manual
// Subscription it was not meant for.
type InstallPlanHandler struct {
	Subscriptions admit.Subscriptions
	Policies      Policies
}

// For returns the handler of the endpoint that sends rules.
func (h *InstallPlanHandler) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return admit.Typed[*review.Meta]{Kind: schema.GroupKind{Group: olm.Group, Kind: olm.InstallPlanKind}, Decode: review.DecodeMeta,
		Active: func() bool { return h.Policies.InstallPlanOwnerDrop != Off || h.Policies.Approval != Off }, Decide: h.decide}.For(rules)
}

// decide judges an update (the endpoint's rules send no other).
func (h *InstallPlanHandler) decide(ctx context.Context, r admit.Request[*review.Meta]) (admission.Response, error) {
	obj, old := r.Object, r.Old
	// The Subscriptions the update drops, as if each were live: most updates drop none, and
	// need no lookup.
	var dropped []string
	if h.Policies.InstallPlanOwnerDrop != Off {
		dropped = droppedSubscriptionNames(old.OwnerReferences, obj.OwnerReferences)
	}
	drops := len(dropped) > 0
	var spec planSpec
	approves := false
	if h.Policies.Approval != Off {
		oldSpec, err := readPlanSpec(r.OldObject.Raw)
		if err == nil {
			spec, err = readPlanSpec(r.Request.Object.Raw)
		}
		if err != nil {
			return admission.Response{}, admit.BadRequest(fmt.Errorf("decoding InstallPlan spec: %w", err))
		}
		approves = spec.Approved && !oldSpec.Approved
	}
	if !drops && !approves {
		return admission.Allowed(""), nil
	}
	var violations []Violation
	if drops {
		// The owner check reads the dropped Subscriptions by name: its cost is what the plan
		// names, not how many Subscriptions a tenant put in the namespace.
		live, err := h.Subscriptions.Live(ctx, obj.Namespace, dropped)
		if err != nil {
			return admit.LookupFailed(ctx, InstallPlansWebhook, "Subscriptions", "policies not checked", err), nil
		}
		violations = InstallPlanPolicies(h.Policies, obj.Name, old.OwnerReferences, obj.OwnerReferences, live)
	}
	if approves {
		// The approval guard reads the namespace's Subscriptions' spec and status.
		subs, err := h.Subscriptions.List(ctx, obj.Namespace, false)
		if err != nil {
			return admit.LookupFailed(ctx, InstallPlansWebhook, "Subscriptions", "policies not checked", err), nil
		}
		violations = append(violations, ApprovalPolicies(h.Policies, Approval{Plan: obj.Name, Owners: obj.OwnerReferences, CSVs: spec.CSVs, Generation: spec.Generation}, subs)...)
	}
	return Respond(ctx, violations), nil
}

// droppedSubscriptionNames names the Subscriptions whose ownerReference the update drops, as if
// every one were live.
func droppedSubscriptionNames(oldRefs, newRefs []metav1.OwnerReference) []string {
	all := map[string]types.UID{}
	for _, r := range oldRefs {
		all[r.Name] = r.UID
	}
	return owners.DroppedOwners(oldRefs, newRefs, all)
}
