package setup_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/testenv"
)

// The approval guard through a real kube-apiserver, in its default mode (warn): approving the
// plan of a namespace mixing approvals, which also upgrades the Manual Subscription, is admitted
// with a warning naming it; approving a plan its Subscription has moved on from is warned; OLM's
// own updates of an approved plan are not.
func TestApprovalGuard(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	c, w := testenv.WarningClient(t, env.Config, env.Scheme)
	ns := testenv.Namespace(t, env.Client, "approval-warn")

	subscribe := func(name, pkg string, approval v1alpha1.Approval, plan, installed, current string) *v1alpha1.Subscription {
		t.Helper()
		s := builders.Subscription(ns, name, pkg, approval)
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		s.Status.InstallPlanRef = &corev1.ObjectReference{Kind: "InstallPlan", Namespace: ns, Name: plan}
		s.Status.InstallPlanGeneration = 2 // install-mixed's
		s.Status.InstalledCSV, s.Status.CurrentCSV = installed, current
		s.Status.LastUpdated = metav1.Now()
		if err := c.Status().Update(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	a := subscribe("a", "etcd", v1alpha1.ApprovalAutomatic, "install-mixed", "etcd.v1", "etcd.v2")
	b := subscribe("b", "redis", v1alpha1.ApprovalManual, "install-mixed", "redis.v1", "redis.v2")
	owner := func(s *v1alpha1.Subscription) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: olm.Group + "/v1alpha1", Kind: olm.SubscriptionKind, Name: s.Name, UID: s.UID}
	}
	plan := func(name string, gen int, csvs []string, owners ...metav1.OwnerReference) *v1alpha1.InstallPlan {
		t.Helper()
		// As OLM writes it in a namespace mixing approvals: Manual, not approved.
		ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners},
			Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: csvs, Approval: v1alpha1.ApprovalManual, Generation: gen}}
		if err := c.Create(ctx, ip); err != nil {
			t.Fatal(err)
		}
		w.Take()
		return ip
	}
	approve := func(ip *v1alpha1.InstallPlan) string {
		t.Helper()
		ip.Spec.Approved = true
		if err := c.Update(ctx, ip); err != nil {
			t.Fatalf("approving %s in warn mode: %v", ip.Name, err)
		}
		return w.Take()
	}

	mixed := plan("install-mixed", 2, []string{"etcd.v2", "redis.v2"}, owner(a), owner(b))
	if got := approve(mixed); !strings.Contains(got, "InstallPlan install-mixed installs etcd.v2 (Automatic Subscription a) and also upgrades Subscription b from redis.v1 to redis.v2, whose approval is Manual") {
		t.Errorf("approving the mixed plan: warnings %q, want the Manual upgrade named", got)
	}
	mixed.Labels = map[string]string{"touched-by": "olm"}
	if err := c.Update(ctx, mixed); err != nil {
		t.Fatal(err)
	}
	if got := w.Take(); got != "" {
		t.Errorf("updating an approved plan: warnings %q, want none", got)
	}

	old := plan("install-old", 1, []string{"etcd.v2"}, owner(a))
	if got := approve(old); !strings.Contains(got, "InstallPlan install-old is not the newest plan of Subscription a (its newest plan is install-mixed)") {
		t.Errorf("approving a superseded plan: warnings %q, want it named with the newest", got)
	}
}
