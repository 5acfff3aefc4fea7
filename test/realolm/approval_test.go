package realolm

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
)

// TestApprovalGuard: in a namespace where a Manual Subscription waits on an upgrade, stock OLM
// gives a new Automatic Subscription a Manual plan that also holds the Manual operator's upgrade
// (one plan per namespace, Manual if any Subscription is: OLM #1859, #2325). Approving it to
// install the new operator upgrades the Manual one, unasked. With olmguard's
// --policy-approval=enforce that approval is denied, naming the Manual upgrade; so is approving a
// plan OLM has superseded, naming the newest; the Manual operator's own upgrade plan and a first
// install in a mixed namespace are admitted.
func TestApprovalGuard(t *testing.T) {
	c, o := realOLM(t)
	ctx := context.Background()

	stock := mixedApprovalNamespace(t, c, "approval-stock")
	approve(t, c, stock.mixed)
	waitCSV(t, c, stock.ns, Alpha.CSVName("2.0.0"))
	waitCSV(t, c, stock.ns, Gamma.CSVName("1.0.0"))
	t.Logf("stock OLM %s: approving %s for the Automatic Subscription gamma upgraded the Manual Subscription alpha to %s",
		o.Version, stock.mixed.Name, Alpha.CSVName("2.0.0"))

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client, "--policy-approval=enforce")
	guarded := mixedApprovalNamespace(t, c, "approval-olmguard")
	// The apiserver calls the webhook once it has read its configuration: dry runs until then.
	var err error
	if perr := poll(ctx, func(ctx context.Context) (bool, error) {
		err = setApproved(ctx, c.Client, guarded.mixed, client.DryRunAll)
		return apierrors.IsForbidden(err), nil
	}); perr != nil {
		t.Fatalf("with olmguard (enforce), approving the mixed plan %s was never denied: last answer %v", guarded.mixed.Name, err)
	}
	err = setApproved(ctx, c.Client, guarded.mixed)
	wantUpgrade := fmt.Sprintf("also upgrades Subscription alpha from %s to %s", Alpha.CSVName("1.0.0"), Alpha.CSVName("2.0.0"))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantUpgrade) {
		t.Fatalf("with olmguard (enforce), approving %s: %v, want a denial saying it %s", guarded.mixed.Name, err, wantUpgrade)
	}
	t.Logf("with olmguard, approving the mixed plan: %v", err)
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if err := c.Client.List(ctx, csvs, client.InNamespace(guarded.ns)); err != nil {
		t.Fatal(err)
	}
	for _, csv := range csvs.Items {
		if csv.Name != Alpha.CSVName("1.0.0") {
			t.Errorf("with olmguard, CSV %s/%s was installed though no approval was admitted", guarded.ns, csv.Name)
		}
	}

	// A superseded plan: alpha's first plan, left unapproved while a plan for the namespace
	// installed alpha and gamma together, after which OLM made alpha's upgrade plan.
	ns := operatorNamespace(t, c, "approval-stale")
	alpha := subscribe(t, c, ns, "alpha", Alpha, v1alpha1.ApprovalManual, Alpha.CSVName("1.0.0"))
	first := must(PlanOf(ctx, c.Client, alpha))(t)
	gamma := subscribe(t, c, ns, "gamma", Gamma, v1alpha1.ApprovalAutomatic, "")
	both := must(PlanOf(ctx, c.Client, gamma))(t)
	t.Logf("%s: alpha's first plan %s %v, then gamma's %s %v (approval %s)", ns, first.Name, first.Spec.ClusterServiceVersionNames,
		both.Name, both.Spec.ClusterServiceVersionNames, both.Spec.Approval)
	approve(t, c, both) // a first install of both in a mixed namespace: nothing to object to
	waitCSV(t, c, ns, Alpha.CSVName("1.0.0"))
	upgrade := must(nextPlan(ctx, c.Client, alpha, first.Name))(t)
	if upgrade.Name == both.Name {
		upgrade = must(nextPlan(ctx, c.Client, alpha, both.Name))(t)
	}
	t.Logf("%s: OLM then pointed alpha at %s %v (generation %d; the first plan's: %d)", ns, upgrade.Name,
		upgrade.Spec.ClusterServiceVersionNames, upgrade.Spec.Generation, first.Spec.Generation)
	err = setApproved(ctx, c.Client, first)
	wantStale := fmt.Sprintf("InstallPlan %s is not the newest plan of Subscription alpha (its newest plan is %s)", first.Name, upgrade.Name)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantStale) {
		t.Fatalf("with olmguard (enforce), approving the superseded plan %s: %v, want a denial saying %s", first.Name, err, wantStale)
	}
	t.Logf("with olmguard, approving the superseded plan: %v", err)
	approve(t, c, upgrade) // the Manual operator's own upgrade, owned by gamma too as OLM owns every plan
	waitCSV(t, c, ns, Alpha.CSVName("2.0.0"))
	checkLogs(t, o)
}

// mixedApproval is a namespace as OLM leaves it once a Manual and an Automatic Subscription meet.
type mixedApproval struct {
	ns      string
	upgrade *v1alpha1.InstallPlan // the Manual Subscription's own upgrade plan
	mixed   *v1alpha1.InstallPlan // the plan OLM resolved for both
}

// mixedApprovalNamespace installs alpha 1.0.0 with a Manual Subscription, waits for OLM's plan of
// its upgrade to 2.0.0, then subscribes to gamma with Automatic approval and returns the plan OLM
// makes for the namespace then. It checks that plan is as #1859 describes: Manual, and holding
// both gamma and alpha's upgrade. (OLM v0.46 leaves alpha pointing at its own upgrade plan.)
func mixedApprovalNamespace(t *testing.T, c *cluster.Cluster, prefix string) mixedApproval {
	t.Helper()
	ctx := context.Background()
	ns := operatorNamespace(t, c, prefix)
	alpha := subscribe(t, c, ns, "alpha", Alpha, v1alpha1.ApprovalManual, Alpha.CSVName("1.0.0"))
	first := must(PlanOf(ctx, c.Client, alpha))(t)
	approve(t, c, first)
	waitCSV(t, c, ns, Alpha.CSVName("1.0.0"))
	upgrade := must(nextPlan(ctx, c.Client, alpha, first.Name))(t)
	if !slices.Contains(upgrade.Spec.ClusterServiceVersionNames, Alpha.CSVName("2.0.0")) || upgrade.Spec.Approved {
		t.Fatalf("OLM's plan %s/%s after alpha 1.0.0 installed: CSVs %v, approved %v; want alpha's upgrade, waiting for approval",
			ns, upgrade.Name, upgrade.Spec.ClusterServiceVersionNames, upgrade.Spec.Approved)
	}

	gamma := subscribe(t, c, ns, "gamma", Gamma, v1alpha1.ApprovalAutomatic, "")
	mixed := must(PlanOf(ctx, c.Client, gamma))(t)
	t.Logf("%s: the Automatic Subscription gamma got plan %s: approval %s, CSVs %v (alpha's own upgrade plan: %s)",
		ns, mixed.Name, mixed.Spec.Approval, mixed.Spec.ClusterServiceVersionNames, upgrade.Name)
	if mixed.Spec.Approval != v1alpha1.ApprovalManual || mixed.Spec.Approved ||
		!slices.Contains(mixed.Spec.ClusterServiceVersionNames, Gamma.CSVName("1.0.0")) ||
		!slices.Contains(mixed.Spec.ClusterServiceVersionNames, Alpha.CSVName("2.0.0")) {
		t.Fatalf("OLM's plan %s/%s for the Automatic Subscription gamma: approval %s (approved %v), CSVs %v; want Manual, unapproved, with gamma and alpha's upgrade",
			ns, mixed.Name, mixed.Spec.Approval, mixed.Spec.Approved, mixed.Spec.ClusterServiceVersionNames)
	}
	return mixedApproval{ns: ns, upgrade: upgrade, mixed: mixed}
}

// nextPlan waits until OLM points sub at a plan other than prev, and returns it.
func nextPlan(ctx context.Context, c client.Client, sub *v1alpha1.Subscription, prev string) (*v1alpha1.InstallPlan, error) {
	var plan *v1alpha1.InstallPlan
	err := poll(ctx, func(ctx context.Context) (bool, error) {
		s := &v1alpha1.Subscription{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sub), s); err != nil {
			return false, err
		}
		if s.Status.InstallPlanRef == nil || s.Status.InstallPlanRef.Name == prev {
			return false, nil
		}
		p := &v1alpha1.InstallPlan{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Status.InstallPlanRef.Name}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		plan = p
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("OLM never moved Subscription %s/%s on from plan %s: %w", sub.Namespace, sub.Name, prev, err)
	}
	return plan, nil
}

// approve approves plan as a user does, and fails the test if that is not admitted.
func approve(t *testing.T, c *cluster.Cluster, plan *v1alpha1.InstallPlan) {
	t.Helper()
	if err := setApproved(context.Background(), c.Client, plan); err != nil {
		t.Fatalf("approving InstallPlan %s/%s: %v", plan.Namespace, plan.Name, err)
	}
}

// setApproved sets spec.approved with a merge patch, as `kubectl patch installplan --type merge
// -p '{"spec":{"approved":true}}'` does.
func setApproved(ctx context.Context, c client.Client, plan *v1alpha1.InstallPlan, opts ...client.PatchOption) error {
	p := &v1alpha1.InstallPlan{}
	p.Namespace, p.Name = plan.Namespace, plan.Name
	return c.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approved":true}}`)), opts...)
}
