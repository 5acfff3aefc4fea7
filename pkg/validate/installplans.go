package validate

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm"
)

// DroppedOwners returns the names of live Subscriptions (name -> UID) referenced by oldRefs but
// not by newRefs: an update that drops them lets the garbage collector delete a plan still in use.
func DroppedOwners(oldRefs, newRefs []metav1.OwnerReference, live map[string]types.UID) []string {
	kept := map[types.UID]bool{}
	for _, r := range newRefs {
		if r.Kind == olm.SubscriptionKind {
			kept[r.UID] = true
		}
	}
	var out []string
	for _, r := range oldRefs {
		if r.Kind != olm.SubscriptionKind || kept[r.UID] {
			continue
		}
		if uid, ok := live[r.Name]; ok && uid == r.UID {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out
}

// InstallPlanPolicies checks an InstallPlan update.
func InstallPlanPolicies(p Policies, plan string, oldRefs, newRefs []metav1.OwnerReference, live map[string]types.UID) []Violation {
	if p.InstallPlanOwnerDrop == Off {
		return nil
	}
	dropped := DroppedOwners(oldRefs, newRefs, live)
	if len(dropped) == 0 {
		return nil
	}
	return []Violation{{Policy: "installplan-owner-drop", Mode: p.InstallPlanOwnerDrop, Message: fmt.Sprintf(
		"InstallPlan %s must keep the ownerReferences of live Subscriptions %s: without them the garbage collector can delete a plan still in use",
		plan, strings.Join(dropped, ", "))}}
}
