package scenario

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/testenv"
)

// StaleRun is one replay of the F2 consequence of OLM issue #3199.
type StaleRun struct {
	F1Run
	// Stale is when the plan moved on without the interleaved Subscription being told.
	Stale time.Time
}

// ReplayStaleSubscription replays #3199 in a fresh namespace whose subscription syncer runs
// (sim.RunSubscriptionSyncer), waits until the interleaved Subscription shows the plan awaiting
// approval, then approves and executes the plan: OLM tells only the plan's owners, so that
// Subscription keeps InstallPlanPending/RequiresApproval after the plan is Complete.
func ReplayStaleSubscription(ctx context.Context, sim *olmsim.Sim, cat *olmsim.Catalog, ns string) (StaleRun, error) {
	var r StaleRun
	var err error
	if r.F1Run, err = Replay3199(ctx, sim, cat, ns); err != nil {
		return r, err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		s := &v1alpha1.Subscription{}
		err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(r.Auto), s)
		c := s.Status.GetCondition(v1alpha1.SubscriptionInstallPlanPending)
		return c != nil && c.Reason == string(v1alpha1.InstallPlanPhaseRequiresApproval), err
	})
	if err != nil {
		return r, fmt.Errorf("no plan awaiting approval shown on Subscription %s/%s: %w", ns, r.Auto.Name, err)
	}
	if err := sim.ApproveInstallPlan(ctx, ns, r.Plan.Name); err != nil {
		return r, err
	}
	r.Stale = time.Now()
	return r, sim.ExecutePlan(ctx, ns, r.Plan.Name)
}

// InStep reports whether a Subscription's InstallPlan conditions agree with its plan.
func InStep(ctx context.Context, c client.Client, sub *v1alpha1.Subscription) (bool, error) {
	s := &v1alpha1.Subscription{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sub), s); err != nil {
		return false, err
	}
	var plan *v1alpha1.InstallPlan
	if key, ok := drift.PlanKey(s); ok {
		plan = &v1alpha1.InstallPlan{}
		if err := c.Get(ctx, key, plan); apierrors.IsNotFound(err) {
			plan = nil
		} else if err != nil {
			return false, err
		}
	}
	return len(drift.Compare(s, plan)) == 0, nil
}
