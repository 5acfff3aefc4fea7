package e2e

// Measurements for docs/performance.md, run by `make bench` (OLMGUARD_BENCH=1). They report
// figures and check outcomes, never times: a slow machine must not fail them.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
)

func skipUnlessBench(t *testing.T) {
	if os.Getenv("OLMGUARD_BENCH") != "1" {
		t.Skip("measurement: set OLMGUARD_BENCH=1 (make bench)")
	}
}

// fastClient is an admin client without client-side throttling, for filling the cluster.
func fastClient(t *testing.T, c *cluster.Cluster) client.Client {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	cl, err := client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// parallel runs f(i) for i in [0, n) on workers goroutines and returns the first error.
func parallel(n, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

// TestMeasureOperandCleanup: the uninstall of an operator whose CSV opted in to cleanup, with
// 1,000 operands in its target namespace; from the CSV's deletion to the finalizer released.
func TestMeasureOperandCleanup(t *testing.T) {
	skipUnlessBench(t)
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	startWebhook(t, c)
	waitWebhookActive(t, ctx, c)
	sim := newSim(t, c, "olm-measure", olmsim.V0_46)
	b := widgetBundle("lambda", 1)
	b.OwnedCRDs = []v1alpha1.CRDDescription{{Name: "doodads.measure.example.com", Version: "v1", Kind: "Doodad"}}
	cat := &olmsim.Catalog{Name: "measure", Bundles: []olmsim.Bundle{b}}
	sub := installOperator(t, ctx, sim, cat, "measure", "lambda", "measure-team")
	const operands = 1000
	fast := fastClient(t, c)
	gvk := schema.GroupVersionKind{Group: "measure.example.com", Version: "v1", Kind: "Doodad"}
	err := parallel(operands, 8, func(i int) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace("measure-team")
		u.SetName(fmt.Sprintf("d%d", i))
		return fast.Create(ctx, u)
	})
	if err != nil {
		t.Fatal(err)
	}
	startController(t, c, strings.Fields(os.Getenv("OLMGUARD_MEASURE_CONTROLLER_ARGS"))...)
	start := time.Now()
	uninstall(t, ctx, c, sim, sub)
	waitCSVGone(t, ctx, c, "measure", "lambda.v1", 5*time.Minute)
	took := time.Since(start)
	if n := countOperands(t, ctx, c, gvk, "measure-team"); n != 0 {
		t.Fatalf("%d operands left", n)
	}
	t.Logf("RESULT operand cleanup: %d operands deleted and the finalizer released %s after the CSV's deletion", operands, took.Round(10*time.Millisecond))
}

// TestMeasureControllerMemory: the controller's peak RSS on a cluster holding 2,000 CSVs of
// 500 KB, 10,000 Jobs and 5,000 Pods, once its caches have synced and it has reconciled them.
func TestMeasureControllerMemory(t *testing.T) {
	skipUnlessBench(t)
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	fast := fastClient(t, c)
	const csvs, jobs, pods = 2000, 10000, 5000
	for _, ns := range []string{"mem-csvs", "mem-jobs", "mem-pods"} {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
	}
	desc := strings.Repeat("An operator description with details and examples. ", 500<<10/52)
	start := time.Now()
	err := parallel(csvs, 8, func(i int) error {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
			"metadata": map[string]any{"namespace": "mem-csvs", "name": fmt.Sprintf("op%d.v1.0.0", i),
				"finalizers": []any{olmguard.CleanupFinalizer}},
			"spec": map[string]any{"displayName": "op", "description": desc, "install": map[string]any{"strategy": "deployment"}}}}
		return fast.Create(ctx, u)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d CSVs of %d KB created in %s", csvs, len(desc)>>10, time.Since(start).Round(time.Second))
	start = time.Now()
	err = parallel(jobs, 8, func(i int) error {
		return fast.Create(ctx, builders.SuspendedJob("mem-jobs", fmt.Sprintf("job-%d", i)))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d suspended Jobs created in %s", jobs, time.Since(start).Round(time.Second))
	start = time.Now()
	err = parallel(pods, 8, func(i int) error {
		return fast.Create(ctx, builders.UnscheduledPod("mem-pods", fmt.Sprintf("pod-%d", i)))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d Pods created in %s", pods, time.Since(start).Round(time.Second))

	// First without the periodic OLM audit, then with every reconciler and until the leader's
	// first audit (every kind doctor reads, a page at a time) is done: the difference is the
	// audit's share of the peak.
	without := startController(t, c, "--controllers=installplan-owners,subscription-drift,csv-cleanup,unpack-jobs,catalog-pods")
	time.Sleep(30 * time.Second) // every CSV, Job and Pod reconciled once
	rssWithout, err := without.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	without.Stop()
	t.Logf("RESULT controller peak RSS without olm-audit: %d MiB with %d CSVs of %d KB, %d Jobs, %d Pods", rssWithout>>20, csvs, len(desc)>>10, jobs, pods)

	start = time.Now()
	p := startController(t, c)
	var done string
	for done == "" && time.Since(start) < 15*time.Minute {
		time.Sleep(time.Second)
		b, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "OLM audit done") {
				done = line
			}
		}
	}
	if done == "" {
		t.Fatalf("no OLM audit done within 15 minutes; log in %s", p.Log)
	}
	audit := time.Since(start)
	if wait := 30*time.Second - audit; wait > 0 {
		time.Sleep(wait)
	}
	rss, err := p.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT controller peak RSS: %d MiB with every reconciler (first OLM audit done %s after start: %s)", rss>>20, audit.Round(time.Second), done)
}

// TestMeasureLargeSubscriptions: the webhook's and the controller's peak RSS with 200
// Subscriptions of 1 MiB each (spec.config.env) in one namespace, each process run with
// GOMEMLIMIT at its pod's memory limit (webhook 128 MiB, controller 256 MiB). The Subscriptions
// are created before the webhook starts; then one more Subscription CREATE, two CREATEs each
// policy must deny, an InstallPlan CREATE, UPDATE and approval go through the webhook with every
// policy enforced. It reports the peaks and fails when a process exited or a policy did not
// decide (the apiserver let a request through because the webhook failed or timed out).
// OLMGUARD_MEASURE_WEBHOOK_ARGS adds flags to the webhook's.
func TestMeasureLargeSubscriptions(t *testing.T) {
	skipUnlessBench(t)
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const ns, subs, entries = "mem-subs", 200, builders.LargeSubscriptionVars // 1 MiB each
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	og := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
		"metadata": map[string]any{"namespace": ns, "name": "og"}, "spec": map[string]any{}}}
	if err := c.Client.Create(ctx, og); err != nil {
		t.Fatal(err)
	}
	bigSub := func(name, pkg, approval string) *unstructured.Unstructured {
		return builders.LargeSubscription(ns, name, pkg, approval)
	}
	fast := fastClient(t, c)
	start := time.Now()
	if err := parallel(subs, 4, func(i int) error {
		return fast.Create(ctx, bigSub(fmt.Sprintf("sub-%d", i), fmt.Sprintf("pkg-%d", i), "Automatic"))
	}); err != nil {
		t.Fatal(err)
	}
	stored := &unstructured.Unstructured{}
	stored.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("Subscription"))
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sub-0"}, stored); err != nil {
		t.Fatal(err)
	}
	got, _, _ := unstructured.NestedSlice(stored.Object, "spec", "config", "env")
	if len(got) != entries {
		t.Fatalf("stored Subscription has %d env entries, want %d: the CRD pruned spec.config", len(got), entries)
	}
	t.Logf("%d Subscriptions of %d KiB created in %s", subs, entries*builders.LargeSubscriptionVarSize>>10, time.Since(start).Round(time.Second))

	t.Setenv("GOMEMLIMIT", "128MiB")
	wh := startWebhook(t, c, append([]string{"--policy-duplicate-package=enforce", "--policy-mixed-approval=enforce",
		"--policy-installplan-owner-drop=enforce", "--policy-approval=enforce"}, strings.Fields(os.Getenv("OLMGUARD_MEASURE_WEBHOOK_ARGS"))...)...)
	waitWebhookActive(t, ctx, c)
	var undecided []string
	decide := func(what string, ok bool) {
		if !ok {
			undecided = append(undecided, what)
		}
		t.Logf("%s: decided=%v", what, ok)
	}
	start = time.Now()
	err := c.Client.Create(ctx, bigSub("one-more", "pkg-new", "Automatic"))
	decide("Subscription CREATE allowed", err == nil)
	err = c.Client.Create(ctx, bigSub("dup", "pkg-0", "Automatic"))
	decide("Subscription CREATE denied by duplicate-package", err != nil && strings.Contains(err.Error(), "already has Subscription"))
	err = c.Client.Create(ctx, bigSub("manual", "pkg-manual", "Manual"))
	decide("Subscription CREATE denied by mixed-approval", err != nil && strings.Contains(err.Error(), "are not"))
	sub0, more := &v1alpha1.Subscription{}, &v1alpha1.Subscription{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sub-0"}, sub0); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "one-more"}, more); err != nil {
		t.Fatal(err)
	}
	ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plan"},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"pkg-new.v1"}, Approval: v1alpha1.ApprovalManual}}
	if err := c.Client.Create(ctx, ip); err != nil {
		t.Fatal(err)
	}
	all := &metav1.PartialObjectMetadataList{}
	all.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("SubscriptionList"))
	if err := c.Client.List(ctx, all, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	// Every Subscription of the namespace: also those a policy that failed open let in.
	decide("InstallPlan CREATE owned by every Subscription (F1)", len(ip.OwnerReferences) == len(all.Items) && scenario.OwnedBy(ip, sub0.UID) && scenario.OwnedBy(ip, more.UID))
	// An UPDATE dropping an owner: the mutating webhook puts it back (it reads whole
	// Subscriptions), or the validating one denies the write; either way the owner stays.
	dropped := ip.DeepCopy()
	first := dropped.OwnerReferences[0]
	dropped.OwnerReferences = dropped.OwnerReferences[1:]
	_ = c.Client.Update(ctx, dropped)
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(ip), ip); err != nil {
		t.Fatal(err)
	}
	decide("InstallPlan UPDATE dropping an owner kept it", scenario.OwnedBy(ip, first.UID))
	approved := ip.DeepCopy()
	approved.Spec.Approved = true
	err = c.Client.Update(ctx, approved)
	decide("InstallPlan approval answered", err == nil)
	took := time.Since(start)
	if wh.Exited() {
		t.Errorf("the webhook exited; log in %s", wh.Log)
	}
	rss, err := wh.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(wh.Log)
	if err != nil {
		t.Fatal(err)
	}
	failedOpen := strings.Count(string(b), "allowing the request unchanged")
	t.Logf("RESULT webhook peak RSS: %d MiB (limit 128 MiB) with %d Subscriptions of %d KiB in one namespace; %d of 6 requests decided in %s, %d lookups failed open",
		rss>>20, subs, entries*builders.LargeSubscriptionVarSize>>10, 6-len(undecided), took.Round(100*time.Millisecond), failedOpen)

	t.Setenv("GOMEMLIMIT", "256MiB")
	ctl := startController(t, c)
	time.Sleep(30 * time.Second) // caches synced (readyz) and every object reconciled once
	if ctl.Exited() {
		t.Errorf("the controller exited; log in %s", ctl.Log)
	}
	rss, err = ctl.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT controller peak RSS: %d MiB (limit 256 MiB) with %d Subscriptions of %d KiB in one namespace", rss>>20, subs+1, entries*builders.LargeSubscriptionVarSize>>10)
	if len(undecided) > 0 {
		t.Errorf("not decided by the webhook: %s", strings.Join(undecided, "; "))
	}
}
