package subscriptiondrift_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

var env *testenv.Env

const window = 2 * time.Second

// TestMain runs one control plane and a controller manager with only this reconciler.
func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func() error, error) {
		env = e
		return testenv.RunManager(e.Config, testenv.ManagerOptions(), setup.Controller{SubscriptionDrift: subscriptiondrift.Options{Window: window}}.Reconciler(subscriptiondrift.Name))
	})
}

func events(ctx context.Context, t *testing.T, ns, name, reason string) []corev1.Event {
	t.Helper()
	list := &corev1.EventList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func poll(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, cond); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// startSim starts the OLM simulator with the F1 catalog on the shared control plane.
func startSim(ctx context.Context, t *testing.T) (*olmsim.Sim, *olmsim.Catalog) {
	t.Helper()
	env = testenv.Shared(t)
	sim, err := olmsim.Start(ctx, env.Config, env.Scheme, olmsim.Options{CompleteJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	cat := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	return sim, cat
}

// #3199's consequence: the plan completes, only its owner is notified, and the interleaved
// Subscription keeps InstallPlanPending. Past the window: a Warning, the owner repair and a nudge;
// OLM's syncer then clears the condition and the drift is announced resolved.
func TestStaleSubscriptionIsReportedRepairedAndNudged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*testenv.Patience)
	defer cancel()
	sim, cat := startSim(ctx, t)
	ns := "drift-stale"
	go sim.RunSubscriptionSyncer(ctx, ns)
	r, err := scenario.ReplayStaleSubscription(ctx, sim, cat, ns)
	if err != nil {
		t.Fatal(err)
	}
	completed := r.Stale
	auto := &v1alpha1.Subscription{}
	poll(ctx, t, "drift reported on beta", func(ctx context.Context) (bool, error) {
		return len(events(ctx, t, ns, "beta", subscriptiondrift.ReasonDrift)) > 0, nil
	})
	if took := time.Since(completed); took < window {
		t.Errorf("reported %s after the plan completed, before the %s window", took, window)
	}
	ev := events(ctx, t, ns, "beta", subscriptiondrift.ReasonDrift)[0]
	if ev.Type != corev1.EventTypeWarning {
		t.Errorf("drift event type %s, want Warning", ev.Type)
	}
	t.Logf("event: %s", ev.Message)

	ip := &v1alpha1.InstallPlan{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(r.Plan), ip); err != nil {
		t.Fatal(err)
	}
	if !scenario.OwnedBy(ip, r.Auto.UID) || !scenario.OwnedBy(ip, r.Manual.UID) {
		t.Errorf("plan owners after the report = %v, want both Subscriptions", ip.OwnerReferences)
	}
	poll(ctx, t, "beta's conditions agree with the completed plan", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(r.Auto), auto)
		return auto.Status.GetCondition(v1alpha1.SubscriptionInstallPlanPending) == nil, err
	})
	if auto.Annotations[olmguard.ResyncAnnotation] == "" {
		t.Errorf("beta was not nudged: annotations %v", auto.Annotations)
	}
	poll(ctx, t, "drift announced resolved", func(ctx context.Context) (bool, error) {
		return len(events(ctx, t, ns, "beta", subscriptiondrift.ReasonDriftResolved)) > 0, nil
	})
	// alpha, an owner, was notified all along: never reported, never nudged.
	if n := len(events(ctx, t, ns, "alpha", subscriptiondrift.ReasonDrift)); n != 0 {
		t.Errorf("alpha got %d drift events", n)
	}
}

// A Subscription that stays in drift (OLM down: no syncer) is nudged again, with back-off, and
// reported once.
func TestPersistentDriftIsNudgedAgainAndReportedOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.Patience)
	defer cancel()
	sim, cat := startSim(ctx, t)
	ns := "drift-persistent"
	if _, err := sim.CreateOperatorGroup(ctx, ns, "og"); err != nil {
		t.Fatal(err)
	}
	sub, err := sim.CreateSubscription(ctx, ns, "alpha", cat, "alpha", v1alpha1.ApprovalAutomatic)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sim.Install(ctx, ns, true)
	if err != nil {
		t.Fatal(err)
	}
	// The plan completed, but OLM (stopped) never told the Subscription: forge the stale state.
	if err := sim.SyncSubscriptionStatus(ctx, ns, sub.Name); err != nil {
		t.Fatal(err)
	}
	fresh := &v1alpha1.Subscription{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.Status.InstallPlanRef == nil || fresh.Status.InstallPlanRef.Name != plan.Name {
		t.Fatalf("Subscription references %v, want plan %s", fresh.Status.InstallPlanRef, plan.Name)
	}
	fresh.Status.SetCondition(v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionInstallPlanPending, Status: corev1.ConditionTrue, Reason: "Installing"})
	if err := env.Client.Status().Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	var first string
	poll(ctx, t, "first nudge", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(sub), fresh)
		first = fresh.Annotations[olmguard.ResyncAnnotation]
		return first != "", err
	})
	poll(ctx, t, "second nudge", func(ctx context.Context) (bool, error) {
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(sub), fresh)
		return fresh.Annotations[olmguard.ResyncAnnotation] != first, err
	})
	// Events are written asynchronously: the report's, made before the first nudge, may lag.
	poll(ctx, t, "drift reported", func(ctx context.Context) (bool, error) {
		return len(events(ctx, t, ns, sub.Name, subscriptiondrift.ReasonDrift)) > 0, nil
	})
	if n := len(events(ctx, t, ns, sub.Name, subscriptiondrift.ReasonDrift)); n != 1 {
		t.Errorf("%d drift events, want 1 (one per episode)", n)
	}
	if c := fresh.Status.GetCondition(v1alpha1.SubscriptionInstallPlanPending); c == nil || c.Reason != "Installing" {
		t.Errorf("olmguard must never write OLM's status: InstallPlanPending = %+v", c)
	}
}

// OLM's resolution failed while a replaced CSV was still being deleted, and OLM does not retry an
// unsatisfiable resolution: once the CSV it blames is gone, the reconciler asks OLM to resolve
// again, naming only the CSV that is gone.
func TestStaleResolutionFailureIsNudged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.Patience)
	defer cancel()
	env = testenv.Shared(t)
	ns := "drift-stale-resolution"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	csv := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": olm.V1alpha1APIVersion, "kind": olm.ClusterServiceVersionKind,
			"metadata": map[string]any{"namespace": ns, "name": name},
			"spec":     map[string]any{"displayName": "alpha", "install": map[string]any{"strategy": "deployment"}}}}
	}
	v1, v2 := csv("alpha.v1.0.0"), csv("alpha.v2.0.0")
	for _, o := range []client.Object{v1, v2} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	sub := builders.Subscription(ns, "alpha", "alpha", v1alpha1.ApprovalManual)
	if err := env.Client.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	sub.Status.LastUpdated = now
	sub.Status.Conditions = []v1alpha1.SubscriptionCondition{{Type: v1alpha1.SubscriptionResolutionFailed, Status: corev1.ConditionTrue,
		Reason: "ConstraintsNotSatisfiable", LastTransitionTime: &now,
		Message: "constraints not satisfiable: @existing/" + ns + "//alpha.v1.0.0, @existing/" + ns + "//alpha.v2.0.0 "}}
	if err := env.Client.Status().Update(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, v1); err != nil {
		t.Fatal(err)
	}
	poll(ctx, t, "a nudge once alpha.v1.0.0 is gone", func(ctx context.Context) (bool, error) {
		got := &v1alpha1.Subscription{}
		err := env.Client.Get(ctx, client.ObjectKeyFromObject(sub), got)
		return err == nil && got.Annotations[olmguard.ResyncAnnotation] != "", err
	})
	poll(ctx, t, "a Warning naming the CSV that is gone", func(ctx context.Context) (bool, error) {
		return len(events(ctx, t, ns, sub.Name, subscriptiondrift.ReasonStaleResolution)) > 0, nil
	})
	msg := events(ctx, t, ns, sub.Name, subscriptiondrift.ReasonStaleResolution)[0].Message
	if !strings.Contains(msg, "alpha.v1.0.0") || strings.Contains(msg, "alpha.v2.0.0") {
		t.Errorf("the Event blames %q: want alpha.v1.0.0 only (alpha.v2.0.0 still exists)", msg)
	}
}
