package validate

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// TestApprovalOwnersAreOLMsSubscriptions: the approval guard reads a plan's Subscription owners by
// pkg/owners' rule, the one of the InstallPlan webhook, the repair and doctor: kind Subscription of
// OLM's group. Fails before the fix: the guard had its own test, kind only, and took a reference
// to a Subscription of another API group for one of OLM's.
func TestApprovalOwnersAreOLMsSubscriptions(t *testing.T) {
	moved := withStatus(sub("a", "etcd", v1alpha1.ApprovalAutomatic), "install-3", 3, "etcd.v1", "etcd.v3")
	otherGroup := ref("a", "uid-a")
	otherGroup.APIVersion = "evil.example.com/v1"
	for _, tc := range []struct {
		name  string
		owner metav1.OwnerReference
		want  int
	}{
		{"OLM's Subscription", ref("a", "uid-a"), 1},
		{"a Subscription of another group", otherGroup, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ApprovalPolicies(Policies{Approval: Warn}, Approval{"install-2", []metav1.OwnerReference{tc.owner}, []string{"etcd.v2"}, 2},
				[]v1alpha1.Subscription{moved})
			if len(got) != tc.want {
				t.Errorf("got %+v, want %d violations", got, tc.want)
			}
		})
	}
}
