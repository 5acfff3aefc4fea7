// Package operatorgroups holds the OperatorGroup guard's knowledge: OLM installs in a namespace
// only while it holds exactly one OperatorGroup. With more than one, olm-operator fails every CSV
// there with reason TooManyOperatorGroups (OLM PR #669); with none, a CSV there fails with
// NoOperatorGroup (OLM issue #1063) and the catalog-operator's namespace sync fails too. The
// OperatorGroup and Subscription webhooks, doctor and the csv-cleanup reconciler (which namespaces a
// CSV targets) decide with it.
package operatorgroups

import (
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Live reports whether an OperatorGroup counts for the rule: one being deleted does not.
func Live(g metav1.Object) bool { return g.GetDeletionTimestamp() == nil }

// object is a pointer to an OperatorGroup's metadata or to a whole OperatorGroup.
type object[T any] interface {
	*T
	metav1.Object
}

// LiveNames returns the names of the live groups, sorted, skip excepted ("" skips none): the
// OperatorGroups a namespace holds besides the one being written.
func LiveNames[T any, PT object[T]](groups []T, skip string) []string {
	var out []string
	for i := range groups {
		g := PT(&groups[i])
		if Live(g) && (skip == "" || g.GetName() != skip) {
			out = append(out, g.GetName())
		}
	}
	sort.Strings(out)
	return out
}

// OldestFirst returns the names of the live groups, the one to keep first: the oldest, by name
// among those created in the same second. Deleting all but the first leaves OLM one group.
func OldestFirst[T any, PT object[T]](groups []T) []string {
	var live []PT
	for i := range groups {
		if g := PT(&groups[i]); Live(g) {
			live = append(live, g)
		}
	}
	sort.SliceStable(live, func(i, j int) bool {
		a, b := live[i].GetCreationTimestamp(), live[j].GetCreationTimestamp()
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return live[i].GetName() < live[j].GetName()
	})
	out := make([]string, len(live))
	for i, g := range live {
		out[i] = g.GetName()
	}
	return out
}

// TooMany reports whether live OperatorGroups in one namespace make OLM fail every CSV there
// (TooManyOperatorGroups, OLM PR #669).
func TooMany(live int) bool { return live > 1 }

// Missing reports whether a namespace holding live OperatorGroups lacks one: OLM installs none
// of its Subscriptions, and fails its CSVs with NoOperatorGroup (OLM issue #1063).
func Missing(live int) bool { return live == 0 }

// CSVFailure returns the reason of a CSV that OLM failed on its namespace's OperatorGroups
// (TooManyOperatorGroups or NoOperatorGroup), false for any other CSV.
func CSVFailure(c *v1alpha1.ClusterServiceVersion) (v1alpha1.ConditionReason, bool) {
	r := c.Status.Reason
	if c.Status.Phase != v1alpha1.CSVPhaseFailed || (r != v1alpha1.CSVReasonTooManyOperatorGroups && r != v1alpha1.CSVReasonNoOperatorGroup) {
		return "", false
	}
	return r, true
}
