package validate

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/operatorgroups"
)

// The checks of the OperatorGroup guard (--policy-operatorgroups), as olmguard_webhook_policy_violations_total names them.
const (
	// SecondOperatorGroupPolicy: an OperatorGroup created in a namespace that already holds one.
	SecondOperatorGroupPolicy = "second-operatorgroup"
	// MissingTargetNamespacePolicy: spec.targetNamespaces naming a namespace that does not exist.
	MissingTargetNamespacePolicy = "missing-target-namespace"
	// NoOperatorGroupPolicy: a Subscription created in a namespace without an OperatorGroup.
	NoOperatorGroupPolicy = "no-operatorgroup"
)

// OperatorGroupPolicies checks an OperatorGroup being written. others are the namespace's
// OperatorGroups when it is being created (nil for an update; it may itself be among them and is
// skipped by name); missingTargets are the names in its spec.targetNamespaces that no namespace
// has. A second OperatorGroup follows the policy's mode; missing targets are only ever warned
// about: the namespaces may simply be created next.
func OperatorGroupPolicies(p Policies, name, namespace string, others []metav1.ObjectMeta, missingTargets []string) []Violation {
	if p.OperatorGroups == Off {
		return nil
	}
	var out []Violation
	if existing := operatorgroups.LiveNames(others, name); operatorgroups.TooMany(len(existing) + 1) {
		// OLM fails every CSV in a namespace with more than one OperatorGroup, reason
		// TooManyOperatorGroups, until one is left (OLM PR #669).
		out = append(out, Violation{Policy: SecondOperatorGroupPolicy, Mode: p.OperatorGroups, Message: fmt.Sprintf(
			"namespace %s already has OperatorGroup %s: OLM fails every CSV in a namespace with more than one OperatorGroup (reason TooManyOperatorGroups); use the existing one, or delete it before creating %s",
			namespace, strings.Join(existing, ", "), name)})
	}
	if len(missingTargets) > 0 {
		out = append(out, Violation{Policy: MissingTargetNamespacePolicy, Mode: Warn, Message: fmt.Sprintf(
			"OperatorGroup %s in namespace %s targets namespaces that do not exist: %s; OLM sets up its operators' access there only once they exist (a typo, or namespaces still to be created)",
			name, namespace, strings.Join(missingTargets, ", "))})
	}
	return out
}

// SubscriptionWithoutOperatorGroup checks a Subscription being created against its namespace's
// OperatorGroups: without exactly one, the catalog-operator's namespace sync fails (olm-facts.md
// §4: it reads the unpack settings from the OperatorGroup), and a CSV there fails with reason
// NoOperatorGroup (OLM issue #1063), so OLM never installs it. Only ever a warning: the
// OperatorGroup may be created next.
func SubscriptionWithoutOperatorGroup(p Policies, sub *v1alpha1.Subscription, groups []metav1.ObjectMeta) []Violation {
	if p.OperatorGroups == Off || !operatorgroups.Missing(len(operatorgroups.LiveNames(groups, ""))) {
		return nil
	}
	return []Violation{{Policy: NoOperatorGroupPolicy, Mode: Warn, Message: fmt.Sprintf(
		"namespace %s has no OperatorGroup, so OLM will not install Subscription %s: create one OperatorGroup in namespace %s (spec.targetNamespaces [%s] for a single-namespace operator, an empty spec for all namespaces)",
		sub.Namespace, sub.Name, sub.Namespace, sub.Namespace)}}
}
