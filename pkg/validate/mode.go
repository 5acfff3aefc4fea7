// Package validate holds olmguard's admission policies. Each has a mode: enforce (deny), warn
// (allow with an admission warning) or off. The decisions are pure functions; the handlers decode,
// look up and answer.
package validate

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/metrics"
)

// Mode is how a policy acts on a violation.
type Mode string

const (
	Enforce Mode = "enforce"
	Warn    Mode = "warn"
	Off     Mode = "off"
)

// String implements flag.Value.
func (m *Mode) String() string { return string(*m) }

// Set implements flag.Value.
func (m *Mode) Set(s string) error {
	switch Mode(s) {
	case Enforce, Warn, Off:
		*m = Mode(s)
		return nil
	}
	return fmt.Errorf("invalid policy mode %q: want enforce, warn or off", s)
}

// active reports whether a policy in mode m runs at all (the zero Mode does not).
func (m Mode) active() bool { return m == Enforce || m == Warn }

// Policies are the modes of every policy, as the webhook's flags set them.
type Policies struct {
	// MixedApproval: a namespace mixing Manual and Automatic Subscriptions (OLM then makes every
	// plan Manual, so the Automatic ones stop upgrading on their own).
	MixedApproval Mode
	// DuplicatePackage: a second Subscription for the same package in one namespace.
	DuplicatePackage Mode
	// InstallPlanOwnerDrop: an InstallPlan update that drops a live Subscription's ownerReference
	// (the garbage collector could then delete a plan still in use).
	InstallPlanOwnerDrop Mode
	// CleanupFinalizer: removal of olmguard.io/cleanup by anyone but olmguard's controller while
	// its cleanup is pending.
	CleanupFinalizer Mode
	// OperatorGroups: a second OperatorGroup in a namespace (OLM then fails every CSV there), and,
	// as warnings whatever the mode unless off, targetNamespaces naming a namespace that does not
	// exist and a Subscription in a namespace without an OperatorGroup.
	OperatorGroups Mode
	// Approval: approving an InstallPlan that is not the newest of its Subscriptions, or one that
	// also upgrades a Manual Subscription beside the Automatic ones it was resolved for.
	Approval Mode
	// CatalogTrust: a CatalogSource outside the trusted catalogs (TrustedCatalogs), and a
	// Subscription installing from one (OLM #3820: OLM grants whatever such a catalog serves).
	CatalogTrust Mode
	// ReplacesCycle: a CSV whose spec.replaces names itself or closes a cycle with its
	// namespace's CSVs (OCPBUGS-23954: olm-operator then loops where it reports ClusterOperator
	// status, as on OpenShift).
	ReplacesCycle Mode
}

// DefaultPolicies are the flag defaults: warn where OLM's own behaviour is only surprising,
// enforce where a write would lose data or cleanup. OperatorGroups warns: a second OperatorGroup
// stops installs in its namespace but deletes nothing, and is undone by deleting it; denying it
// by default could break an installer that creates the new group before deleting the old one.
// CatalogTrust is off: which catalogs to trust is the cluster's own decision. ReplacesCycle warns:
// a cycle harms only clusters whose olm-operator reports ClusterOperator status (OpenShift), and
// OLM's own CSVs never form one; enforce refuses it.
func DefaultPolicies() Policies {
	return Policies{MixedApproval: Warn, DuplicatePackage: Warn, InstallPlanOwnerDrop: Enforce, CleanupFinalizer: Enforce, OperatorGroups: Warn, Approval: Warn, CatalogTrust: Off, ReplacesCycle: Warn}
}

// Violation is one policy broken by a request.
type Violation struct {
	Policy  string
	Mode    Mode
	Message string
}

// Respond turns violations into an admission answer: any enforced one denies with every enforced
// message; warned ones become warnings; off ones are dropped. Each enforced or warned violation
// is counted in olmguard_webhook_policy_violations_total and logged with the request (the
// logger controller-runtime puts in ctx names the object and the user): a warning reaches only
// the writer, and the log is where an administrator finds what a policy in warn mode let through.
// Messages quote what the writer wrote (names, addresses, images): each is one line with its
// control characters escaped (printable.Line), so that neither the writer's terminal nor a log
// reader's acts on escape sequences in them.
func Respond(ctx context.Context, violations []Violation) admission.Response {
	var denied, warnings []string
	for _, v := range violations {
		msg := printable.Line(v.Message)
		if v.Mode == Enforce || v.Mode == Warn {
			metrics.PolicyViolations.WithLabelValues(v.Policy, string(v.Mode)).Inc()
			log.FromContext(ctx).Info("policy violation", "policy", v.Policy, "mode", v.Mode, "message", msg)
		}
		switch v.Mode {
		case Enforce:
			denied = append(denied, msg)
		case Warn:
			warnings = append(warnings, "olmguard: "+msg)
		}
	}
	var resp admission.Response
	if len(denied) > 0 {
		resp = admission.Denied("olmguard: " + strings.Join(denied, "; "))
	} else {
		resp = admission.Allowed("")
	}
	resp.Warnings = warnings
	return resp
}

// BindFlags registers one flag per policy, with the current modes as defaults.
func (p *Policies) BindFlags(fs *flag.FlagSet) {
	fs.Var(&p.MixedApproval, "policy-mixed-approval", "mode of the policy against a namespace mixing Manual and Automatic Subscriptions: enforce, warn or off")
	fs.Var(&p.DuplicatePackage, "policy-duplicate-package", "mode of the policy against a second Subscription for a package in one namespace: enforce, warn or off")
	fs.Var(&p.InstallPlanOwnerDrop, "policy-installplan-owner-drop", "mode of the policy against InstallPlan updates that drop a live Subscription's ownerReference: enforce, warn or off")
	fs.Var(&p.OperatorGroups, "policy-operatorgroups", "mode of the policy against a second OperatorGroup in a namespace: enforce, warn or off; its warnings on missing target namespaces and on Subscriptions without an OperatorGroup are never denials, and off turns them off too")
	fs.Var(&p.Approval, "policy-approval", "mode of the policy against approving an InstallPlan that is not its Subscriptions' newest, or that also upgrades a Manual Subscription it was not approved for: enforce, warn or off")
	fs.Var(&p.CatalogTrust, "policy-catalog-trust", "mode of the policy against CatalogSources outside the trusted catalog namespaces and registries, and Subscriptions installing from them (OLM #3820): enforce, warn or off")
	fs.Var(&p.ReplacesCycle, "policy-replaces-cycle", "mode of the policy against a CSV whose spec.replaces names itself or closes a cycle with its namespace's CSVs, which makes olm-operator loop where it reports ClusterOperator status (OCPBUGS-23954): enforce, warn or off")
	fs.Var(&p.CleanupFinalizer, "policy-cleanup-finalizer", "mode of the policy against removing olmguard.io/cleanup while its cleanup is pending: enforce, warn or off")
}
