package e2e

// Faults: olmguard's processes killed in the middle of their work, and the kube-apiserver
// restarted under them. The short variants run in make test; OLMGUARD_LONG=1 (make e2e-long) runs
// the sizes docs/reliability.md reports.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// scale is short in make test and long with OLMGUARD_LONG=1.
func scale(short, long int) int {
	if os.Getenv("OLMGUARD_LONG") == "1" {
		return long
	}
	return short
}

// populatedStatus is OLM's first status write on a plan; the controller repairs only after it.
func populatedStatus(csv string) v1alpha1.InstallPlanStatus {
	return v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseInstalling, CatalogSources: []string{},
		Plan: []*v1alpha1.Step{{Resolving: csv, Status: "Unknown", Resource: v1alpha1.StepResource{Kind: "ClusterServiceVersion", Name: csv}}}}
}

// pointAt writes what OLM writes on a Subscription once it made a plan for it.
func pointAt(ctx context.Context, c client.Client, sub *v1alpha1.Subscription, ip *v1alpha1.InstallPlan) error {
	sub.Status.InstallPlanRef = &corev1.ObjectReference{APIVersion: olm.V1alpha1APIVersion, Kind: olm.InstallPlanKind,
		Namespace: ip.Namespace, Name: ip.Name, UID: ip.UID}
	sub.Status.State = v1alpha1.SubscriptionStateUpgradePending
	sub.Status.LastUpdated = metav1.Now()
	return c.Status().Update(ctx, sub)
}

func ownerNames(ip *v1alpha1.InstallPlan) []string {
	var out []string
	for _, r := range ip.OwnerReferences {
		out = append(out, r.Name+"/"+string(r.UID))
	}
	return out
}

// TestWebhookKilledUnderLoad: the webhook is SIGKILLed halfway through a burst of InstallPlan and
// CSV creates. No API request fails (failurePolicy Ignore), and the controller, started afterwards,
// gives every object what the webhook would have.
func TestWebhookKilledUnderLoad(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	n := scale(100, 500) // InstallPlans, and as many CSVs: one of each per namespace
	webhook := startWebhook(t, c)
	waitWebhookActive(t, ctx, c)

	// Each namespace holds two Subscriptions; OLM's plan names only the first (OLM issue #3199).
	namespaces := make([]string, n)
	subs := make([][2]*v1alpha1.Subscription, n)
	t.Cleanup(func() {
		for _, ns := range namespaces {
			_ = c.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	if err := parallel(n, 8, func(i int) error {
		var err error
		if namespaces[i], err = testenv.NewNamespace(ctx, c.Client, fmt.Sprintf("wk-%03d", i)); err != nil {
			return err
		}
		for j, name := range []string{"a", "b"} {
			subs[i][j] = builders.Subscription(namespaces[i], name, name, v1alpha1.ApprovalAutomatic)
			if err := c.Client.Create(ctx, subs[i][j]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("setting up %d namespaces: %v", n, err)
	}

	var created, killedAfter atomic.Int64
	// Each namespace's writes hold the gate shared; the kill holds it alone, so it lands halfway
	// through the load however the workers and the killer are scheduled: after about n of the 2n
	// objects, the writes of at most one namespace per worker in flight.
	var gate sync.RWMutex
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for created.Load() < int64(n) && ctx.Err() == nil {
			time.Sleep(2 * time.Millisecond)
		}
		gate.Lock()
		defer gate.Unlock()
		webhook.Kill()
		killedAfter.Store(created.Load())
	}()
	plans := make([]*v1alpha1.InstallPlan, n)
	start := time.Now()
	var failed atomic.Int64
	firstErr := parallel(n, 8, func(i int) error {
		gate.RLock()
		defer gate.RUnlock()
		err := createPlanAndCSV(ctx, c, namespaces[i], subs[i], &created, &plans[i])
		if err != nil {
			failed.Add(1)
		}
		return err
	})
	<-killed
	load := time.Since(start)
	if firstErr != nil {
		t.Fatalf("%d API requests failed with the webhook killed (want 0), first: %v", failed.Load(), firstErr)
	}
	if k := killedAfter.Load(); k >= int64(2*n) {
		t.Fatalf("the webhook was killed only after all %d objects were created", 2*n)
	}
	// What the webhook gave each object: both owners, the cleanup finalizer.
	done := func(ctx context.Context, i int) (plan, csv bool, err error) {
		ip := &v1alpha1.InstallPlan{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(plans[i]), ip); err != nil {
			return false, false, err
		}
		a, b := subs[i][0], subs[i][1]
		want := []string{a.Name + "/" + string(a.UID), b.Name + "/" + string(b.UID)}
		got, err := getCSV(ctx, c, namespaces[i], "op.v1")
		if err != nil {
			return false, false, err
		}
		return slices.Equal(ownerNames(ip), want), slices.Contains(got.Finalizers, olmguard.CleanupFinalizer), nil
	}
	count := func(ctx context.Context) (plans, csvs int, err error) {
		for i := range n {
			planDone, csvDone, err := done(ctx, i)
			if err != nil {
				return 0, 0, err
			}
			plans, csvs = plans+btoi(planDone), csvs+btoi(csvDone)
		}
		return plans, csvs, nil
	}
	byWebhookPlans, byWebhookCSVs, err := count(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d plans and %d CSVs created in %s with 0 failed requests; webhook killed after %d objects; it had mutated %d plans and %d CSVs",
		n, n, load.Round(time.Millisecond), killedAfter.Load(), byWebhookPlans, byWebhookCSVs)
	if byWebhookPlans == 0 || byWebhookPlans == n {
		t.Fatalf("the webhook mutated %d of %d plans: the kill did not fall inside the load", byWebhookPlans, n)
	}

	started := time.Now()
	startController(t, c)
	testenv.Eventually(t, "every plan owned by both Subscriptions and every CSV finalized, counted from the controller's start", func(ctx context.Context) (bool, error) {
		p, s, err := count(ctx)
		return p == n && s == n, err
	})
	t.Logf("converged %s after the controller started", time.Since(started).Round(10*time.Millisecond))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// trialGVK is the operand kind of the kill trials' operators.
var trialGVK = schema.GroupVersionKind{Group: "kill.example.com", Version: "v1", Kind: "Trial"}

// trialBundle is version v of an operator that owns trials.kill.example.com and opts in to cleanup.
func trialBundle(pkg string, v int) olmsim.Bundle {
	b := widgetBundle(pkg, v)
	b.OwnedCRDs = []v1alpha1.CRDDescription{{Name: "trials.kill.example.com", Version: trialGVK.Version, Kind: trialGVK.Kind}}
	return b
}

// TestControllerKilledDuringCleanup: the controller is SIGKILLed once or twice at a random point
// of a cleanup, then started again. Uninstall trials end with every operand deleted, upgrade trials
// with none, and every trial with the old CSV gone (olmguard's finalizer released).
func TestControllerKilledDuringCleanup(t *testing.T) {
	c := cluster.Shared(t)
	trials := scale(6, 50)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	startWebhook(t, c)
	waitWebhookActive(t, ctx, c)
	sim := newSim(t, c, "olm-kill", olmsim.V0_46)
	cat := &olmsim.Catalog{Name: "kill-trials"}
	const operands = 60
	var midCleanup, operandsDeleted int
	for i := range trials {
		upgrade := i%2 == 1
		pkg := fmt.Sprintf("trial%d", i)
		ns, team := "kill-"+pkg, "kill-"+pkg+"-team"
		t.Cleanup(func() {
			for _, n := range []string{ns, team} {
				_ = c.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
			}
		})
		cat.Bundles = append(cat.Bundles, trialBundle(pkg, 1))
		sub := installOperator(t, ctx, sim, cat, ns, pkg, team)
		createOperands(t, ctx, c, trialGVK, team, operands)
		// The controller is away while OLM deletes the old CSV: the cleanup starts with it.
		if upgrade {
			cat.Bundles = append(cat.Bundles, trialBundle(pkg, 2))
			if _, err := sim.Install(ctx, ns, false); err != nil {
				t.Fatal(err)
			}
		} else {
			uninstall(t, ctx, c, sim, sub)
		}
		old := pkg + ".v1"
		kills := 1 + rand.IntN(2)
		var at []string
		for range kills {
			p := startController(t, c)
			// An upgrade's cleanup deletes no operands and is over sooner.
			delay := time.Duration(rand.IntN(1000)) * time.Millisecond
			if upgrade {
				delay /= 4
			}
			time.Sleep(delay)
			p.Kill()
			left := countOperands(t, ctx, c, trialGVK, team)
			_, err := getCSV(ctx, c, ns, old)
			pending := err == nil
			if pending {
				midCleanup++
			}
			at = append(at, fmt.Sprintf("%s (CSV pending %t, %d operands)", delay, pending, left))
		}
		p := startController(t, c)
		waitCSVGone(t, ctx, c, ns, old, testenv.Patience)
		left := countOperands(t, ctx, c, trialGVK, team)
		kind := "uninstall"
		if upgrade {
			kind = "upgrade"
		}
		t.Logf("trial %d (%s): killed after %s; then %d of %d operands left", i, kind, strings.Join(at, ", "), left, operands)
		switch {
		case upgrade && left != operands:
			t.Errorf("trial %d: an upgrade deleted %d operands", i, operands-left)
		case !upgrade && left != 0:
			t.Errorf("trial %d: %d operands left after the uninstall", i, left)
		}
		if !upgrade {
			operandsDeleted += operands - left
		} else {
			// Leave no CSV claiming the CRD: the next uninstall trial must own it alone.
			fresh := &v1alpha1.Subscription{}
			if err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: pkg}, fresh); err != nil {
				t.Fatal(err)
			}
			uninstall(t, ctx, c, sim, fresh)
			waitCSVGone(t, ctx, c, ns, pkg+".v2", testenv.Patience)
		}
		p.Stop()
	}
	// No CSV anywhere still waits on olmguard's finalizer.
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if err := c.Client.List(ctx, csvs); err != nil {
		t.Fatal(err)
	}
	for _, csv := range csvs.Items {
		if csv.DeletionTimestamp != nil && slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) && strings.HasPrefix(csv.Namespace, "kill-") {
			t.Errorf("CSV %s/%s still holds olmguard's finalizer", csv.Namespace, csv.Name)
		}
	}
	t.Logf("%d trials: %d kills landed with the cleanup pending; %d operands deleted by uninstalls, 0 by upgrades", trials, midCleanup, operandsDeleted)
}

// TestAPIServerRestart: the kube-apiserver goes away for longer than controller-runtime's default
// leader renew deadline (10 s) and comes back. The webhook and the leading controller keep their
// processes and work again.
func TestAPIServerRestart(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*testenv.Patience)
	defer cancel()
	ns := c.FreshNamespace(ctx, t, "e2e-apiserver")
	webhook := startWebhook(t, c)
	waitWebhookActive(t, ctx, c)
	// How long the apiserver stays away is up to the machine: 15 s, plus however long it takes to
	// start again. The leader rides out an outage shorter than its renew deadline, so the test
	// gives it one longer than any restart that is not a hang; what it checks is that olmguard's
	// setting governs, not controller-runtime's 10 s default, which a 15 s outage exceeds. The
	// defaults (40 s) are pinned by TestFlagDefaults in pkg/controller.
	controller := startController(t, c, "--leader-elect", "--leader-election-namespace="+ns,
		"--leader-elect-renew-deadline="+(2*testenv.Patience).String(), "--leader-elect-lease-duration="+(3*testenv.Patience).String())
	testenv.Eventually(t, "the controller holds the Lease", func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: olmguard.ControllerLeaderElectionID}, lease)
		return err == nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "", client.IgnoreNotFound(err)
	})

	stopped := time.Now()
	if err := c.StopComponent(ctx, cluster.KubeAPIServer); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StartComponent(context.Background(), cluster.KubeAPIServer) })
	time.Sleep(15 * time.Second)
	if err := c.StartComponent(ctx, cluster.KubeAPIServer); err != nil {
		t.Fatal(err)
	}
	t.Logf("kube-apiserver down for %s", time.Since(stopped).Round(100*time.Millisecond))

	// The webhook answers the apiserver again.
	waitWebhookActive(t, ctx, c)
	// The controller's watches resumed: a plan that misses an owner after the restart is repaired.
	a, b := builders.Subscription(ns, "a", "a", v1alpha1.ApprovalAutomatic), builders.Subscription(ns, "b", "b", v1alpha1.ApprovalAutomatic)
	if err := c.Client.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "install-"},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"op.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true}}
	if err := c.Client.Create(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Create(ctx, b); err != nil { // after the plan: only the controller can add it
		t.Fatal(err)
	}
	ip.Status = populatedStatus("op.v1")
	if err := c.Client.Status().Update(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if err := pointAt(ctx, c.Client, b, ip); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "plan created after the restart repaired by the controller", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(ip), ip)
		return scenario.OwnedBy(ip, b.UID), err
	})
	if webhook.Exited() || controller.Exited() {
		t.Errorf("a process exited across the kube-apiserver restart: webhook %t, controller %t", webhook.Exited(), controller.Exited())
	}
	out, err := os.ReadFile(controller.Log)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "leader election lost") {
		t.Error("the controller lost its leadership across the restart")
	}
}

// createPlanAndCSV writes in ns what OLM writes for an install whose plan names only the first of
// the two Subscriptions (OLM issue #3199): the plan, its first status, both Subscriptions pointing
// at it; then the CSV. created counts the plans and CSVs created.
func createPlanAndCSV(ctx context.Context, c *cluster.Cluster, ns string, subs [2]*v1alpha1.Subscription, created *atomic.Int64, plan **v1alpha1.InstallPlan) error {
	ip := &v1alpha1.InstallPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "install-",
			OwnerReferences: []metav1.OwnerReference{owners.SubscriptionOwnerRef(subs[0].Name, subs[0].UID)}},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"op.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true},
	}
	if err := c.Client.Create(ctx, ip); err != nil {
		return fmt.Errorf("creating a plan in %s: %w", ns, err)
	}
	created.Add(1)
	*plan = ip
	ip.Status = populatedStatus("op.v1")
	if err := c.Client.Status().Update(ctx, ip); err != nil {
		return fmt.Errorf("plan status in %s: %w", ns, err)
	}
	for _, s := range subs {
		if err := pointAt(ctx, c.Client, s, ip); err != nil {
			return fmt.Errorf("Subscription status in %s: %w", ns, err)
		}
	}
	csv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": olm.V1alpha1APIVersion, "kind": "ClusterServiceVersion",
		"metadata": map[string]any{"namespace": ns, "name": "op.v1"},
		"spec":     map[string]any{"displayName": "op", "install": map[string]any{"strategy": "deployment"}}}}
	if err := c.Client.Create(ctx, csv); err != nil {
		return fmt.Errorf("creating a CSV in %s: %w", ns, err)
	}
	created.Add(1)
	return nil
}
