// Package owners holds F1's knowledge (OLM issue #3199): which Subscriptions must own an
// InstallPlan, the ownerReference OLM writes for them, and the patch that adds what is missing
// without touching what OLM wrote. The InstallPlan webhook, the repair and drift reconcilers,
// doctor, the Subscription policies and the approval guard all decide with it.
package owners

import (
	"sort"
	"strconv"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Subscription is what the InstallPlan owner computation needs to know of a live Subscription in
// the plan's namespace.
type Subscription struct {
	Name string
	UID  types.UID
	// Deleting is true once the Subscription has a deletionTimestamp: it is never added as an owner.
	Deleting bool
	// InstallPlanRef and InstallPlanRefUID are status.installPlanRef's name and UID ("" when unset).
	InstallPlanRef    string
	InstallPlanRefUID types.UID
}

// refersTo reports whether the Subscription's installPlanRef names the plan (and, when both UIDs
// are known, the same object, not an older plan of that name).
func (s Subscription) refersTo(name string, uid types.UID) bool {
	return s.InstallPlanRef != "" && s.InstallPlanRef == name && (uid == "" || s.InstallPlanRefUID == "" || s.InstallPlanRefUID == uid)
}

// FromSubscriptions turns typed Subscriptions into the view the owner computation uses.
func FromSubscriptions(items []v1alpha1.Subscription) []Subscription {
	out := make([]Subscription, 0, len(items))
	for i := range items {
		out = append(out, FromSubscription(&items[i]))
	}
	return out
}

// FromSubscription is what the owner checks read of one Subscription.
func FromSubscription(s *v1alpha1.Subscription) Subscription {
	v := Subscription{Name: s.Name, UID: s.UID, Deleting: s.DeletionTimestamp != nil}
	if ref := s.Status.InstallPlanRef; ref != nil && (ref.Namespace == "" || ref.Namespace == s.Namespace) {
		v.InstallPlanRef, v.InstallPlanRefUID = ref.Name, ref.UID
	}
	return v
}

// Operation is the admission operation being answered.
type Operation string

const (
	Create Operation = "CREATE"
	Update Operation = "UPDATE"
)

// InstallPlanOwners returns the Subscriptions an InstallPlan must be owned by (OLM issue #3199:
// OLM writes owners once, from a stale snapshot, and never repairs them):
//   - on CREATE, every live Subscription in the namespace: OLM resolves them together and means
//     every plan to be owned by all of them;
//   - on UPDATE (and for the controller's repair), every Subscription whose installPlanRef names the
//     plan, and every Subscription the old object referenced that still exists (a write that drops
//     it gets it back).
//
// Subscriptions being deleted are never included. The result is sorted by name.
func InstallPlanOwners(op Operation, planName string, planUID types.UID, oldRefs []metav1.OwnerReference, subs []Subscription) []Subscription {
	oldNames := map[string]bool{}
	for _, r := range oldRefs {
		if IsSubscriptionRef(r) {
			oldNames[r.Name] = true
		}
	}
	var out []Subscription
	for _, s := range subs {
		if s.Deleting || s.UID == "" || s.Name == "" {
			continue
		}
		if op == Create || s.refersTo(planName, planUID) || oldNames[s.Name] {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SubscriptionOwnerRef is the reference OLM's ownerutil.AddNonBlockingOwner writes.
func SubscriptionOwnerRef(name string, uid types.UID) metav1.OwnerReference {
	f := false
	return metav1.OwnerReference{APIVersion: olm.V1alpha1APIVersion, Kind: olm.SubscriptionKind,
		Name: name, UID: uid, Controller: &f, BlockOwnerDeletion: &f}
}

// OwnerReferencesPatch returns the JSON patch that makes refs include a reference to every owner:
// a missing one is appended; one with the right name and a stale UID gets the live UID. Nothing is
// removed or reordered, so OLM's own references keep their positions. No operations means refs are
// already right.
func OwnerReferencesPatch(refs []metav1.OwnerReference, owners []Subscription) []jsonpatch.Operation {
	var ops []jsonpatch.Operation
	var added []metav1.OwnerReference
	for _, s := range owners {
		stale := -1
		found := false
		for i, r := range refs {
			if !IsSubscriptionRef(r) || r.Name != s.Name {
				continue
			}
			if r.UID == s.UID {
				found = true
				break
			}
			if stale < 0 {
				stale = i
			}
		}
		switch {
		case found:
		case stale >= 0:
			// "add" sets the member whether or not it is there: "replace" fails on a reference
			// written without a uid (the apiserver validates after mutating webhooks), and a
			// patch that does not apply fails the request whatever the failurePolicy.
			ops = append(ops, jsonpatch.NewOperation("add", "/metadata/ownerReferences/"+strconv.Itoa(stale)+"/uid", string(s.UID)))
		default:
			added = append(added, SubscriptionOwnerRef(s.Name, s.UID))
		}
	}
	if len(added) == 0 {
		return ops
	}
	if refs == nil {
		return append(ops, jsonpatch.NewOperation("add", "/metadata/ownerReferences", added))
	}
	for _, r := range added {
		ops = append(ops, jsonpatch.NewOperation("add", "/metadata/ownerReferences/-", r))
	}
	return ops
}

// IsSubscriptionRef matches OLM's GetOwnersByKind: kind Subscription of OLM's group, any version.
func IsSubscriptionRef(r metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	return r.Kind == olm.SubscriptionKind && err == nil && gv.Group == olm.Group
}

// NamesSubscription reports whether refs hold an ownerReference to the Subscription name with
// uid: one IsSubscriptionRef matches, of that name, and of that UID when the reference carries one.
func NamesSubscription(refs []metav1.OwnerReference, name string, uid types.UID) bool {
	for _, r := range refs {
		if IsSubscriptionRef(r) && r.Name == name && (r.UID == "" || r.UID == uid) {
			return true
		}
	}
	return false
}

// DroppedOwners returns the names of live Subscriptions (name -> UID) referenced by oldRefs but
// not by newRefs: an update that drops them lets the garbage collector delete a plan still in use.
func DroppedOwners(oldRefs, newRefs []metav1.OwnerReference, live map[string]types.UID) []string {
	kept := map[types.UID]bool{}
	for _, r := range newRefs {
		if IsSubscriptionRef(r) {
			kept[r.UID] = true
		}
	}
	var out []string
	for _, r := range oldRefs {
		if !IsSubscriptionRef(r) || kept[r.UID] {
			continue
		}
		if uid, ok := live[r.Name]; ok && uid == r.UID {
			out = append(out, r.Name)
		}
	}
	sort.Strings(out)
	return out
}
