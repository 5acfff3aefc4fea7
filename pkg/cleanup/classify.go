// Package cleanup holds the pure decisions of olmguard's CSV cleanup (F3): whether a CSV deletion
// is an uninstall, which cluster-scoped objects belong to the CSV, and where its operands may be
// deleted. OLM's own finalizer (v0.27+) deletes only objects carrying all three owner labels; a
// CSV deleted while OLM is down, bundled ClusterRoles (OLM issue #2985) and the kube-system
// auth-reader RoleBinding are left behind.
package cleanup

import (
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Kind is what a CSV deletion means.
type Kind string

const (
	// Uninstall: nothing will replace or recreate the CSV; operands may be cleaned up.
	Uninstall Kind = "Uninstall"
	// Upgrade: a newer CSV replaces this one (OLM deletes every replaced CSV).
	Upgrade Kind = "Upgrade"
	// Recreate: a Subscription still names the CSV and will create it again.
	Recreate Kind = "Recreate"
	// Copied: a copy in a target namespace; it has no objects of its own.
	Copied Kind = "Copied"
)

// Classify decides what deleting csv means, from the other CSVs and the Subscriptions of its
// namespace (DESIGN.md safety rules, olm-facts.md §3.4). Anything but Uninstall keeps operands.
func Classify(csv *v1alpha1.ClusterServiceVersion, others []v1alpha1.ClusterServiceVersion, subs []v1alpha1.Subscription) (Kind, string) {
	if csv.IsCopied() {
		return Copied, "the CSV is a copy made by OLM for a target namespace"
	}
	switch {
	case csv.Status.Phase == v1alpha1.CSVPhaseReplacing || csv.Status.Phase == v1alpha1.CSVPhaseDeleting:
		return Upgrade, "the CSV is in phase " + string(csv.Status.Phase)
	case csv.Status.Reason == v1alpha1.CSVReasonBeingReplaced || csv.Status.Reason == v1alpha1.CSVReasonReplaced:
		return Upgrade, "the CSV's status reason is " + string(csv.Status.Reason)
	}
	for i := range others {
		o := &others[i]
		if o.Namespace == csv.Namespace && o.Name != csv.Name && !o.IsCopied() && o.Spec.Replaces == csv.Name {
			return Upgrade, "CSV " + o.Name + " replaces it"
		}
	}
	for i := range subs {
		s := &subs[i]
		if NamesCSV(s, csv.Namespace, csv.Name) {
			return Recreate, "Subscription " + s.Name + " still names it and will create it again"
		}
	}
	return Uninstall, "no CSV replaces it and no Subscription names it"
}

// NamesCSV reports whether Subscription s names the CSV namespace/name as its current or installed
// CSV: OLM would create that CSV again.
func NamesCSV(s *v1alpha1.Subscription, namespace, name string) bool {
	return s.Namespace == namespace && (s.Status.CurrentCSV == name || s.Status.InstalledCSV == name)
}
