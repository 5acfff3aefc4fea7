package controller_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/olmguard/olmguard/internal/queueidle"
	"github.com/olmguard/olmguard/pkg/controller/installplans"
	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestFirstPassQueuesOnlyWhatNeedsWork (issue 32): a controller starting on a cluster of settled
// Subscriptions and InstallPlans (each plan owned by the Subscription that references it, each
// Subscription's conditions agreeing with its plan) queues none of them, and still queues the plan
// that misses its owner (repaired) and the Subscription whose plan is gone (drift). Counted from
// controller-runtime's workqueue_adds_total, a property of the queues, not a timing.
//
// Fails before the fix: every object of the initial list entered both queues (at least 40 adds
// each).
func TestFirstPassQueuesOnlyWhatNeedsWork(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	const settled = 40
	ns := "firstpass"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for i := range settled {
		subscribeWithPlan(t, ctx, env.Client, ns, fmt.Sprintf("settled-%d", i), true)
	}
	// A plan written without its owner (F1).
	broken := subscribeWithPlan(t, ctx, env.Client, ns, "broken", false)
	// A Subscription whose plan is gone, its conditions not saying so (F2).
	lost := subscription(ns, "lost")
	if err := env.Client.Create(ctx, lost); err != nil {
		t.Fatal(err)
	}
	lost.Status = v1alpha1.SubscriptionStatus{State: v1alpha1.SubscriptionStateAtLatest, LastUpdated: metav1.Now(),
		InstallPlanRef: &corev1.ObjectReference{Namespace: ns, Name: "install-gone", Kind: "InstallPlan", APIVersion: v1alpha1.GroupVersion.String()}}
	if err := env.Client.Status().Update(ctx, lost); err != nil {
		t.Fatal(err)
	}

	before := queueAdds(t)
	stop, err := testenv.RunManager(env.Config, testenv.ManagerOptions(), setup.DefaultController().Reconcilers()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	})
	testenv.Eventually(t, "the controller repairs "+broken.Name, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.InstallPlan{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(broken), got); err != nil {
			return false, err
		}
		return len(got.OwnerReferences) > 0, nil
	})
	queueidle.Wait(ctx, queueidle.QueuesIdle(ctrlmetrics.Registry), queueidle.Poll, testenv.Patience)

	after := queueAdds(t)
	for _, name := range []string{installplans.Name, subscriptiondrift.Name} {
		added := after[name] - before[name]
		t.Logf("%s: %.0f adds for %d settled pairs", name, added, settled)
		if added >= settled/2 {
			t.Errorf("%s: %.0f adds to the queue on start, with %d settled pairs: the settled ones entered it", name, added, settled)
		}
		if added < 1 {
			t.Errorf("%s: nothing queued on start: the object it must act on was dropped too", name)
		}
	}
}

// subscription is a Subscription to package p of a catalog in olm.
func subscription(ns, name string) *v1alpha1.Subscription {
	return &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:   v1alpha1.SubscriptionSpec{Package: "p", Channel: "stable", CatalogSource: "cat", CatalogSourceNamespace: "olm"},
		Status: v1alpha1.SubscriptionStatus{LastUpdated: metav1.Now()}}
}

// subscribeWithPlan writes Subscription name and its Complete plan, which references it as owner
// when owned, as OLM leaves them once installed; it returns the plan.
func subscribeWithPlan(t *testing.T, ctx context.Context, c client.Client, ns, name string, owned bool) *v1alpha1.InstallPlan {
	t.Helper()
	sub := subscription(ns, name)
	if err := c.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	plan := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "install-" + name},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{name + ".v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true}}
	if owned {
		plan.OwnerReferences = []metav1.OwnerReference{owners.SubscriptionOwnerRef(sub.Name, sub.UID)}
	}
	if err := c.Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	plan.Status = v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseComplete, CatalogSources: []string{},
		Plan: []*v1alpha1.Step{{Resolving: name + ".v1", Status: "Created", Resource: v1alpha1.StepResource{Kind: "ClusterServiceVersion", Name: name + ".v1"}}}}
	if err := c.Status().Update(ctx, plan); err != nil {
		t.Fatal(err)
	}
	sub.Status = v1alpha1.SubscriptionStatus{State: v1alpha1.SubscriptionStateAtLatest, LastUpdated: metav1.Now(), CurrentCSV: name + ".v1", InstalledCSV: name + ".v1",
		InstallPlanRef: &corev1.ObjectReference{Namespace: ns, Name: plan.Name, UID: plan.UID, Kind: "InstallPlan", APIVersion: v1alpha1.GroupVersion.String()}}
	if err := c.Status().Update(ctx, sub); err != nil {
		t.Fatal(err)
	}
	return plan
}

// queueAdds reads workqueue_adds_total by queue name from controller-runtime's registry.
func queueAdds(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "workqueue_adds_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
