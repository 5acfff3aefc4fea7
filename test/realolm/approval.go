package realolm

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// MixedApprovalRun is a namespace as OLM leaves it once a Manual and an Automatic Subscription
// meet.
type MixedApprovalRun struct {
	Namespace string
	Manual    *v1alpha1.Subscription // alpha, installed at 1.0.0, its upgrade to 2.0.0 pending
	Upgrade   *v1alpha1.InstallPlan  // alpha's own upgrade plan
	Mixed     *v1alpha1.InstallPlan  // the plan OLM made for the Automatic Subscription
}

// MixedApproval installs alpha 1.0.0 with a Manual Subscription, waits for OLM's plan of its
// upgrade to 2.0.0, then subscribes to auto with Automatic approval and returns the plan OLM makes
// for the namespace then. It checks that plan is as OLM #1859 and #2325 describe: Manual, and
// holding both auto's CSV and alpha's upgrade. (OLM v0.46 leaves alpha pointing at its own
// upgrade plan.)
func MixedApproval(ctx context.Context, c client.Client, prefix string, auto Package) (MixedApprovalRun, error) {
	ns, err := OperatorNamespace(ctx, c, prefix)
	if err != nil {
		return MixedApprovalRun{}, err
	}
	run := MixedApprovalRun{Namespace: ns}
	run.Manual = NewSubscription(ns, "alpha", Alpha, v1alpha1.ApprovalManual, Alpha.CSVName("1.0.0"))
	if err := c.Create(ctx, run.Manual); err != nil {
		return run, err
	}
	first, err := PlanOf(ctx, c, run.Manual)
	if err == nil {
		err = Approve(ctx, c, first)
	}
	if err == nil {
		err = CSVSucceeded(ctx, c, ns, Alpha.CSVName("1.0.0"))
	}
	if err == nil {
		run.Upgrade, err = NextPlan(ctx, c, run.Manual, first.Name)
	}
	if err != nil {
		return run, err
	}
	if !slices.Contains(run.Upgrade.Spec.ClusterServiceVersionNames, Alpha.CSVName("2.0.0")) || run.Upgrade.Spec.Approved {
		return run, fmt.Errorf("OLM's plan %s/%s after alpha 1.0.0 installed: CSVs %v, approved %v; want alpha's upgrade, waiting for approval",
			ns, run.Upgrade.Name, run.Upgrade.Spec.ClusterServiceVersionNames, run.Upgrade.Spec.Approved)
	}
	automatic := NewSubscription(ns, auto.Name, auto, v1alpha1.ApprovalAutomatic, "")
	if err := c.Create(ctx, automatic); err != nil {
		return run, err
	}
	if run.Mixed, err = PlanOf(ctx, c, automatic); err != nil {
		return run, err
	}
	m := run.Mixed.Spec
	if m.Approval != v1alpha1.ApprovalManual || m.Approved ||
		!slices.Contains(m.ClusterServiceVersionNames, auto.CSVName(auto.Versions[0])) || !slices.Contains(m.ClusterServiceVersionNames, Alpha.CSVName("2.0.0")) {
		return run, fmt.Errorf("OLM's plan %s/%s for the Automatic Subscription %s: approval %s (approved %v), CSVs %v; want Manual, unapproved, with %s and alpha's upgrade",
			ns, run.Mixed.Name, auto.Name, m.Approval, m.Approved, m.ClusterServiceVersionNames, auto.Name)
	}
	return run, nil
}

// NextPlan waits until OLM points sub at a plan other than prev (any plan when prev is empty), and
// returns it.
func NextPlan(ctx context.Context, c client.Client, sub *v1alpha1.Subscription, prev string) (*v1alpha1.InstallPlan, error) {
	var plan *v1alpha1.InstallPlan
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
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
	switch {
	case err != nil && prev == "":
		return nil, fmt.Errorf("no InstallPlan for Subscription %s/%s: %w", sub.Namespace, sub.Name, err)
	case err != nil:
		return nil, fmt.Errorf("OLM never moved Subscription %s/%s on from plan %s: %w", sub.Namespace, sub.Name, prev, err)
	}
	return plan, nil
}

// Approve sets the plan's spec.approved with a merge patch, as `kubectl patch installplan
// --type merge -p '{"spec":{"approved":true}}'` does.
func Approve(ctx context.Context, c client.Client, plan *v1alpha1.InstallPlan, opts ...client.PatchOption) error {
	p := &v1alpha1.InstallPlan{}
	p.Namespace, p.Name = plan.Namespace, plan.Name
	return c.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approved":true}}`)), opts...)
}
