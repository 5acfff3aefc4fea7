package cleanup

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Object is a cluster-scoped object that may belong to a CSV.
type Object struct {
	Kind   string // ClusterRole, ClusterRoleBinding, MutatingWebhookConfiguration, ...
	Name   string
	UID    types.UID
	Labels map[string]string
}

// Owned reports whether the cleanup of the CSV self deletes a cluster object:
//   - it carries all three owner labels of self, as OLM labels what it creates for a CSV; or
//   - it is a ClusterRole or ClusterRoleBinding that OLM labelled only olm.owner=<self> (a bundle
//     manifest, OLM issue #2985);
//
// and, when OLM gives the object the same name in every namespace and version of the package
// (SharedByPackage), no other CSV of the package still uses it (Users.StillUsed). Objects named
// per CSV version and namespace (the ClusterRoles of clusterPermissions, webhook configurations)
// go with their CSV as OLM's own finalizer deletes them. services are self's Services
// (ServiceNames).
func Owned(o Object, self CSVRef, users Users, services map[string]bool) bool {
	l := o.Labels
	if l[olm.OwnerLabel] != self.Name {
		return false
	}
	full := l[olm.OwnerNamespaceLabel] == self.Namespace && l[olm.OwnerKindLabel] == olm.ClusterServiceVersionKind
	if !full && !bundleManifestRBAC(o) {
		return false
	}
	return !SharedByPackage(o, services) || !users.StillUsed(self.Name, &self)
}

// SharedByPackage reports whether OLM gives o one name for every namespace and version of a
// package, so that its owner labels name whichever CSV applied it last: a bundle manifest
// ClusterRole or binding (labelled olm.owner only, #2985), an APIService (<version>.<group>), or
// the <service>-system:auth-delegator ClusterRoleBinding that olm-operator server-side-applies
// with the labels of the CSV it installs (install/certresources.go).
func SharedByPackage(o Object, services map[string]bool) bool {
	switch {
	case bundleManifestRBAC(o), o.Kind == "APIService":
		return true
	case o.Kind == "ClusterRoleBinding":
		svc, ok := strings.CutSuffix(o.Name, authDelegatorSuffix)
		return ok && services[svc]
	}
	return false
}

// authDelegatorSuffix ends the name of the ClusterRoleBinding OLM creates for a webhook or API
// Service: <service>-system:auth-delegator.
const authDelegatorSuffix = "-system:auth-delegator"

// bundleManifestRBAC reports whether o is a ClusterRole or ClusterRoleBinding labelled as OLM
// labels the bundle manifests it applies: olm.owner without olm.owner.namespace or olm.owner.kind
// (OLM issue #2985), so no namespace ties it to one CSV.
func bundleManifestRBAC(o Object) bool {
	_, hasNS := o.Labels[olm.OwnerNamespaceLabel]
	_, hasKind := o.Labels[olm.OwnerKindLabel]
	return (o.Kind == "ClusterRole" || o.Kind == "ClusterRoleBinding") && !hasNS && !hasKind
}

// ServiceNames are the Services OLM creates for the CSV's webhook and API deployments.
func ServiceNames(csv *v1alpha1.ClusterServiceVersion) map[string]bool {
	out := map[string]bool{}
	for _, w := range csv.Spec.WebhookDefinitions {
		if w.DeploymentName != "" {
			out[olm.ServiceName(w.DeploymentName)] = true
		}
	}
	for _, a := range csv.Spec.APIServiceDefinitions.Owned {
		if a.DeploymentName != "" {
			out[olm.ServiceName(a.DeploymentName)] = true
		}
	}
	return out
}

// AuthReaderDeletable reports whether the kube-system RoleBinding <service>-auth-reader may go with
// the CSV self: its subjects are all ServiceAccounts of self's namespace, no other live CSV of that
// namespace (an upgrade's successor, typically) serves the same Service, and no other CSV of the
// package in any namespace still uses it (Users.StillUsed): the binding's name does not hold the
// namespace, so every namespace that installs the package shares it. A CSV being deleted is not
// live: after an uninstall right behind an upgrade, the replaced CSV and its successor are deleted
// together, and each keeping the binding for the other would leave it for good.
func AuthReaderDeletable(service string, subjects []Subject, self CSVRef, users Users, csv *v1alpha1.ClusterServiceVersion, others []v1alpha1.ClusterServiceVersion) bool {
	if len(subjects) == 0 {
		return false
	}
	for _, s := range subjects {
		if s.Kind != "ServiceAccount" || s.Namespace != csv.Namespace {
			return false
		}
	}
	for i := range others {
		o := &others[i]
		if o.Namespace == csv.Namespace && o.Name != csv.Name && o.DeletionTimestamp == nil && !CopiedByOLM(string(o.Status.Reason)) && ServiceNames(o)[service] {
			return false
		}
	}
	return !users.StillUsed(self.Name, &self)
}

// Subject is a RoleBinding subject.
type Subject struct{ Kind, Name, Namespace string }

// OperandCRDs are the CRDs whose custom resources an uninstall may delete: those the CSV owns that
// no other non-copied CSV (in any namespace) also owns, so creating a CSV that claims another
// tenant's CRD never deletes that tenant's data.
func OperandCRDs(csv *v1alpha1.ClusterServiceVersion, others []v1alpha1.ClusterServiceVersion) []v1alpha1.CRDDescription {
	claimed := map[string]bool{}
	for i := range others {
		o := &others[i]
		if o.IsCopied() || (o.Namespace == csv.Namespace && o.Name == csv.Name) {
			continue
		}
		for _, d := range o.Spec.CustomResourceDefinitions.Owned {
			claimed[d.Name] = true
		}
	}
	var out []v1alpha1.CRDDescription
	seen := map[string]bool{}
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		if !claimed[d.Name] && !seen[d.Name] && strings.Contains(d.Name, ".") {
			out = append(out, d)
			seen[d.Name] = true
		}
	}
	return out
}

// OperandCleanup says when the custom resources of an uninstalled operator are deleted
// (--operand-cleanup).
type OperandCleanup string

const (
	// OperandCleanupOptIn deletes operands only for CSVs with spec.cleanup.enabled: true.
	OperandCleanupOptIn OperandCleanup = "opt-in"
	// OperandCleanupAlways deletes operands on every confirmed uninstall.
	OperandCleanupAlways OperandCleanup = "always"
	// OperandCleanupNever never deletes operands.
	OperandCleanupNever OperandCleanup = "never"
)

func (m OperandCleanup) String() string { return string(m) }

// Set implements flag.Value and accepts only the three modes.
func (m *OperandCleanup) Set(s string) error {
	switch v := OperandCleanup(s); v {
	case OperandCleanupOptIn, OperandCleanupAlways, OperandCleanupNever:
		*m = v
		return nil
	}
	return fmt.Errorf("must be one of %s, %s, %s", OperandCleanupOptIn, OperandCleanupAlways, OperandCleanupNever)
}

// DeleteOperands reports whether an uninstall of csv deletes its operands: only for a confirmed
// uninstall, and only when enabled by the CSV (spec.cleanup.enabled, OLM's own unused field) in
// opt-in mode, or by --operand-cleanup=always.
func DeleteOperands(kind Kind, csv *v1alpha1.ClusterServiceVersion, mode OperandCleanup) bool {
	if kind != Uninstall {
		return false
	}
	switch mode {
	case OperandCleanupAlways:
		return true
	case OperandCleanupOptIn:
		return csv.Spec.Cleanup.Enabled
	}
	return false
}

// TargetNamespaces are the namespaces an OperatorGroup's status names; [""] means every namespace
// (all lists them).
func TargetNamespaces(groupNamespaces, all []string) []string {
	if len(groupNamespaces) == 1 && groupNamespaces[0] == "" {
		return all
	}
	return groupNamespaces
}

// csvPackage is the part of a CSV name before its first ".v" followed by a digit.
func csvPackage(csv string) (string, bool) {
	for i := 0; i+2 < len(csv); i++ {
		if csv[i] == '.' && csv[i+1] == 'v' && csv[i+2] >= '0' && csv[i+2] <= '9' {
			return csv[:i], i > 0
		}
	}
	return "", false
}

// OrphanedRBAC reports whether a ClusterRole or ClusterRoleBinding is a bundle manifest OLM
// labelled olm.managed and olm.owner=<csv> only (OLM issue #2985) whose operator exists nowhere:
// OLM's own garbage collection, which matches all three owner labels, never finds it, and
// olmguard's cleanup ran for no CSV still using it. An InstallPlan still executing after its
// operator was uninstalled (re)creates such objects (docs/cleanup.md, "Uninstall during an
// upgrade"), and a role another namespace's CSV kept at its uninstall goes once the last CSV of
// the package is gone. The rule is the cleanup's (Users.StillUsed, with no CSV being cleaned up):
// while any version of the package runs, in any namespace, the object is kept.
func OrphanedRBAC(o Object, users Users) bool {
	name := o.Labels[olm.OwnerLabel]
	return bundleManifestRBAC(o) && name != "" && o.Labels[olm.ManagedLabel] == olm.ManagedLabelValue && !users.StillUsed(name, nil)
}

// StepObject is a cluster-scoped object an InstallPlan step names.
type StepObject struct{ Kind, Name string }

// PlanBundleRBAC adds to objs the ClusterRoles and ClusterRoleBindings an InstallPlan shows OLM
// applied for the CSV named csv: steps of those kinds (group rbac.authorization.k8s.io) resolving
// exactly that CSV, in a status OLM writes once it applied the step. As for PlanCRDs, the plan
// must be of the CSV's namespace and its status is the catalog-operator's alone. OLM creates a
// bundle manifest labelled olm.managed=true only, and labels it olm.owner=<csv> only when it
// applies the step again (catalog StepEnsurer.EnsureClusterRole, OLM #2985): while the plans
// exist, their steps are the one evidence of whose such an object is.
func PlanBundleRBAC(plan *v1alpha1.InstallPlan, csv string, objs map[StepObject]bool) {
	for _, st := range plan.Status.Plan {
		if st == nil || st.Resolving != csv || st.Resource.Group != rbacGroup || st.Resource.Name == "" {
			continue
		}
		if (st.Resource.Kind == "ClusterRole" || st.Resource.Kind == "ClusterRoleBinding") && appliedStepStatus[st.Status] {
			objs[StepObject{Kind: st.Resource.Kind, Name: st.Resource.Name}] = true
		}
	}
}

const rbacGroup = "rbac.authorization.k8s.io"

// OwnedByPlanStep reports whether o, named by a step OLM applied for self (PlanBundleRBAC), is
// self's to delete: labelled exactly as OLM creates a bundle manifest (olm.managed=true and no
// owner label: one labelled olm.owner goes by Owned, whoever it names), and no other CSV of the
// package still uses it (Users.StillUsed, as for any object a package shares).
func OwnedByPlanStep(o Object, self CSVRef, users Users) bool {
	_, labelled := o.Labels[olm.OwnerLabel]
	return bundleManifestRBAC(o) && !labelled && o.Labels[olm.ManagedLabel] == olm.ManagedLabelValue && !users.StillUsed(self.Name, &self)
}
