package olmsim_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
)

// OLM's mapping of plan phases to Subscription conditions (olm-facts.md §2.2), delivered only to
// Subscriptions that own the plan.
func TestSimSubscriptionConditionsFollowOwnedPlans(t *testing.T) {
	sim, ctx := newSim(t, olmsim.V0_46)
	cat := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	r, err := scenario.Replay3199(ctx, sim, cat, uniqueNS("cond"))
	if err != nil {
		t.Fatal(err)
	}
	cond := func(sub *v1alpha1.Subscription, typ v1alpha1.SubscriptionConditionType) *v1alpha1.SubscriptionCondition {
		t.Helper()
		fresh := &v1alpha1.Subscription{}
		if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
			t.Fatal(err)
		}
		return fresh.Status.GetCondition(typ)
	}
	// The Manual Subscription owns and references its own, earlier plan.
	manual := &v1alpha1.Subscription{}
	if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(r.Manual), manual); err != nil {
		t.Fatal(err)
	}
	first := &v1alpha1.InstallPlan{}
	first.Namespace, first.Name = manual.Namespace, manual.Status.InstallPlanRef.Name
	setPhaseOf := func(plan *v1alpha1.InstallPlan, phase v1alpha1.InstallPlanPhase, installed *v1alpha1.InstallPlanCondition) {
		t.Helper()
		ip := &v1alpha1.InstallPlan{}
		if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(plan), ip); err != nil {
			t.Fatal(err)
		}
		ip.Status.Phase, ip.Status.Conditions = phase, nil
		if installed != nil {
			ip.Status.Conditions = []v1alpha1.InstallPlanCondition{*installed}
		}
		if err := sim.Admin.Status().Update(ctx, ip); err != nil {
			t.Fatal(err)
		}
		if err := sim.NotifyOnInstallPlan(ctx, ip); err != nil {
			t.Fatal(err)
		}
	}
	setPhase := func(phase v1alpha1.InstallPlanPhase, installed *v1alpha1.InstallPlanCondition) {
		t.Helper()
		setPhaseOf(first, phase, installed)
	}

	setPhase(v1alpha1.InstallPlanPhaseRequiresApproval, nil)
	if c := cond(r.Manual, v1alpha1.SubscriptionInstallPlanPending); c == nil || c.Reason != "RequiresApproval" {
		t.Fatalf("owner: InstallPlanPending = %+v, want reason RequiresApproval", c)
	}
	setPhase(v1alpha1.InstallPlanPhaseFailed, &v1alpha1.InstallPlanCondition{Type: v1alpha1.InstallPlanInstalled,
		Status: corev1.ConditionFalse, Reason: v1alpha1.InstallPlanReasonComponentFailed, Message: "boom"})
	if c := cond(r.Manual, v1alpha1.SubscriptionInstallPlanFailed); c == nil || c.Reason != v1alpha1.InstallPlanReasonComponentFailed || c.Message != "boom" {
		t.Fatalf("InstallPlanFailed = %+v, want InstallComponentFailed with the plan's message", c)
	}
	if c := cond(r.Manual, v1alpha1.SubscriptionInstallPlanPending); c != nil {
		t.Fatalf("InstallPlanPending kept after failure: %+v", c)
	}
	setPhase(v1alpha1.InstallPlanPhaseFailed, nil)
	if c := cond(r.Manual, v1alpha1.SubscriptionInstallPlanFailed); c == nil || c.Reason != v1alpha1.ReasonInstallPlanFailed {
		t.Fatalf("InstallPlanFailed without an Installed condition = %+v, want reason InstallPlanFailed", c)
	}
	setPhase(v1alpha1.InstallPlanPhaseComplete, nil)
	if cond(r.Manual, v1alpha1.SubscriptionInstallPlanFailed) != nil || cond(r.Manual, v1alpha1.SubscriptionInstallPlanPending) != nil {
		t.Fatal("a Complete plan leaves no plan condition")
	}

	// #3199's plan fails: the interleaved Subscription references it but does not own it, so it
	// is not notified; a sync of its own (a resync) would have shown the failure.
	setPhaseOf(r.Plan, v1alpha1.InstallPlanPhaseFailed, nil)
	if c := cond(r.Auto, v1alpha1.SubscriptionInstallPlanFailed); c != nil {
		t.Fatalf("the Subscription missing from the plan's owners was notified: %+v", c)
	}
	if err := sim.SyncSubscriptionStatus(ctx, r.Auto.Namespace, r.Auto.Name); err != nil {
		t.Fatal(err)
	}
	if c := cond(r.Auto, v1alpha1.SubscriptionInstallPlanFailed); c == nil {
		t.Fatal("a direct sync must show the failure the notification missed")
	}

	// Once its plan is gone and it is not UpgradePending, a Subscription reports InstallPlanMissing.
	if err := sim.Admin.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := sim.SyncSubscriptionStatus(ctx, manual.Namespace, manual.Name); err != nil {
		t.Fatal(err)
	}
	if c := cond(r.Manual, v1alpha1.SubscriptionInstallPlanMissing); c == nil || c.Reason != v1alpha1.ReasonReferencedInstallPlanNotFound {
		t.Fatalf("InstallPlanMissing = %+v, want ReferencedInstallPlanNotFound", c)
	}
}
