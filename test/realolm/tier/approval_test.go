package tier

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestApprovalGuard: in a namespace where a Manual Subscription waits on an upgrade, stock OLM
// gives a new Automatic Subscription a Manual plan that also holds the Manual operator's upgrade
// (one plan per namespace, Manual if any Subscription is: OLM #1859, #2325). Approving it to
// install the new operator upgrades the Manual one, unasked. With olmguard's
// --policy-approval=enforce that approval is denied, naming the Manual upgrade; so is approving a
// plan OLM has superseded, naming the newest; the Manual operator's own upgrade plan and a first
// install in a mixed namespace are admitted.
func TestApprovalGuard(t *testing.T) {
	declare(t, "guard: manual approval", false)
	c, o := realOLM(t)
	ctx := context.Background()

	stock := must(realolm.MixedApproval(ctx, c.Client, "approval-stock", realolm.Gamma))(t)
	approve(t, c, stock.Mixed)
	waitCSV(t, c, stock.Namespace, realolm.Alpha.CSVName("2.0.0"))
	waitCSV(t, c, stock.Namespace, realolm.Gamma.CSVName("1.0.0"))
	t.Logf("stock OLM %s: approving %s for the Automatic Subscription gamma upgraded the Manual Subscription alpha to %s",
		o.Version, stock.Mixed.Name, realolm.Alpha.CSVName("2.0.0"))

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client, "--policy-approval=enforce")
	guarded := must(realolm.MixedApproval(ctx, c.Client, "approval-olmguard", realolm.Gamma))(t)
	// The apiserver calls the webhook once it has read its configuration: dry runs until then.
	var err error
	if perr := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		err = realolm.Approve(ctx, c.Client, guarded.Mixed, client.DryRunAll)
		return apierrors.IsForbidden(err), nil
	}); perr != nil {
		t.Fatalf("with olmguard (enforce), approving the mixed plan %s was never denied: last answer %v", guarded.Mixed.Name, err)
	}
	err = realolm.Approve(ctx, c.Client, guarded.Mixed)
	wantUpgrade := fmt.Sprintf("also upgrades Subscription alpha from %s to %s", realolm.Alpha.CSVName("1.0.0"), realolm.Alpha.CSVName("2.0.0"))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantUpgrade) {
		t.Fatalf("with olmguard (enforce), approving %s: %v, want a denial saying it %s", guarded.Mixed.Name, err, wantUpgrade)
	}
	t.Logf("with olmguard, approving the mixed plan: %v", err)
	csvs, err := realolm.OwnCSVs(ctx, c.Client, guarded.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, csv := range csvs {
		if csv.Name != realolm.Alpha.CSVName("1.0.0") {
			t.Errorf("with olmguard, CSV %s/%s was installed though no approval was admitted", guarded.Namespace, csv.Name)
		}
	}

	// A superseded plan: alpha's first plan, left unapproved while a plan for the namespace
	// installed alpha and gamma together, after which OLM made alpha's upgrade plan.
	ns := operatorNamespace(t, c, "approval-stale")
	alpha := subscribe(t, c, ns, "alpha", realolm.Alpha, v1alpha1.ApprovalManual, realolm.Alpha.CSVName("1.0.0"))
	first := must(realolm.PlanOf(ctx, c.Client, alpha))(t)
	gamma := subscribe(t, c, ns, "gamma", realolm.Gamma, v1alpha1.ApprovalAutomatic, "")
	both := must(realolm.PlanOf(ctx, c.Client, gamma))(t)
	t.Logf("%s: alpha's first plan %s %v, then gamma's %s %v (approval %s)", ns, first.Name, first.Spec.ClusterServiceVersionNames,
		both.Name, both.Spec.ClusterServiceVersionNames, both.Spec.Approval)
	approve(t, c, both) // a first install of both in a mixed namespace: nothing to object to
	waitCSV(t, c, ns, realolm.Alpha.CSVName("1.0.0"))
	upgrade := must(realolm.NextPlan(ctx, c.Client, alpha, first.Name))(t)
	if upgrade.Name == both.Name {
		upgrade = must(realolm.NextPlan(ctx, c.Client, alpha, both.Name))(t)
	}
	t.Logf("%s: OLM then pointed alpha at %s %v (generation %d; the first plan's: %d)", ns, upgrade.Name,
		upgrade.Spec.ClusterServiceVersionNames, upgrade.Spec.Generation, first.Spec.Generation)
	err = realolm.Approve(ctx, c.Client, first)
	wantStale := fmt.Sprintf("InstallPlan %s is not the newest plan of Subscription alpha (its newest plan is %s)", first.Name, upgrade.Name)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantStale) {
		t.Fatalf("with olmguard (enforce), approving the superseded plan %s: %v, want a denial saying %s", first.Name, err, wantStale)
	}
	t.Logf("with olmguard, approving the superseded plan: %v", err)
	// OLM made the upgrade plan while gamma's install was still under way, so the plan lists
	// gamma's CSV too: until gamma's Subscription records it installed, approving the plan would
	// also install gamma, and the guard rightly refuses it (seen on a loaded run). A user
	// approves alpha's upgrade once the namespace has settled.
	waitCSV(t, c, ns, realolm.Gamma.CSVName("1.0.0"))
	if err := realolm.SubscriptionInstalled(ctx, c.Client, gamma, realolm.Gamma.CSVName("1.0.0")); err != nil {
		t.Fatal(err)
	}
	approve(t, c, upgrade) // the Manual operator's own upgrade, owned by gamma too as OLM owns every plan
	waitCSV(t, c, ns, realolm.Alpha.CSVName("2.0.0"))
	checkLogs(t, o)
}

// approve approves plan as a user does, and fails the test if that is not admitted.
func approve(t *testing.T, c *cluster.Cluster, plan *v1alpha1.InstallPlan) {
	t.Helper()
	if err := realolm.Approve(context.Background(), c.Client, plan); err != nil {
		t.Fatalf("approving InstallPlan %s/%s: %v", plan.Namespace, plan.Name, err)
	}
}
