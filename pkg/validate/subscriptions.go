package validate

import (
	"fmt"
	"sort"
	"strings"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// SubscriptionPolicies checks a Subscription being created or updated against the other
// Subscriptions of its namespace (others may include sub itself; it is skipped by name).
func SubscriptionPolicies(p Policies, sub *v1alpha1.Subscription, others []v1alpha1.Subscription) []Violation {
	var out []Violation
	if p.DuplicatePackage != Off {
		var dup []string
		for _, o := range others {
			if o.Name != sub.Name && o.DeletionTimestamp == nil && o.Spec.Package == sub.Spec.Package && sub.Spec.Package != "" {
				dup = append(dup, o.Name)
			}
		}
		if len(dup) > 0 {
			sort.Strings(dup)
			out = append(out, Violation{Policy: "duplicate-package", Mode: p.DuplicatePackage, Message: fmt.Sprintf(
				"package %q already has Subscription %s in namespace %s: OLM cannot resolve two Subscriptions for one package",
				sub.Spec.Package, strings.Join(dup, ", "), sub.Namespace)})
		}
	}
	if p.MixedApproval != Off {
		mine := approvalOf(sub)
		var differ []string
		for _, o := range others {
			if o.Name != sub.Name && o.DeletionTimestamp == nil && approvalOf(&o) != mine {
				differ = append(differ, o.Name)
			}
		}
		if len(differ) > 0 {
			sort.Strings(differ)
			out = append(out, Violation{Policy: "mixed-approval", Mode: p.MixedApproval, Message: fmt.Sprintf(
				"Subscription %s is %s but %s in namespace %s are not: OLM plans a namespace's Subscriptions together and makes every plan Manual if any Subscription is Manual",
				sub.Name, mine, strings.Join(differ, ", "), sub.Namespace)})
		}
	}
	return out
}

// approvalOf is the effective approval: OLM treats an empty value as Automatic.
func approvalOf(s *v1alpha1.Subscription) v1alpha1.Approval {
	if s.Spec.InstallPlanApproval == v1alpha1.ApprovalManual {
		return v1alpha1.ApprovalManual
	}
	return v1alpha1.ApprovalAutomatic
}
