package validate

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/owners"
)

// InstallPlanPolicies checks an InstallPlan update.
func InstallPlanPolicies(p Policies, plan string, oldRefs, newRefs []metav1.OwnerReference, live map[string]types.UID) []Violation {
	if p.InstallPlanOwnerDrop == Off {
		return nil
	}
	dropped := owners.DroppedOwners(oldRefs, newRefs, live)
	if len(dropped) == 0 {
		return nil
	}
	return []Violation{{Policy: "installplan-owner-drop", Mode: p.InstallPlanOwnerDrop, Message: fmt.Sprintf(
		"InstallPlan %s must keep the ownerReferences of live Subscriptions %s: without them the garbage collector can delete a plan still in use",
		plan, strings.Join(dropped, ", "))}}
}
