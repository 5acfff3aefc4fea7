package setup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestControllerCacheHoldsOnlyWhatReconcilersRead (issue 32, acceptance line 4): 300 of OLM's
// copied CSVs carrying a 40 KB alm-examples annotation, originals with annotations no reconciler
// reads, and CSVs a tenant labelled olm.copiedFrom itself. After the controller's caches synced
// (every reconciler running), the CSVs read through the manager's cache show: no annotation or
// label outside the keys the reconcilers declare; none of OLM's copies, nor a CSV labelled as a
// copy from its creation (OLM ignores it too); but a CSV labelled olm.copiedFrom that holds
// olmguard's finalizer, with the fields the cleanup reads (issue 31 item 7), whether the webhook
// labelled it olmguard.io/cleanup-tracked as it was written or the controller's tracker did later
// (written in a namespace the webhook does not serve); and an InstallPlan without its steps. A
// property of the cache, not a timing: nothing is measured.
//
// Fails before the fix: every CSV was cached, OLM's copies as a stub (before that, with all their
// annotations: 46 KB each).
func TestControllerCacheHoldsOnlyWhatReconcilersRead(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const namespaces, copiesPerNamespace = 10, 30
	operatorNS := testenv.Namespace(t, env.Client, "cache-operators")
	var targets []string
	for i := range namespaces {
		targets = append(targets, testenv.Namespace(t, env.Client, fmt.Sprintf("cache-target-%d", i)))
	}
	almExamples := `[{"apiVersion":"example.com/v1","kind":"Big","spec":{"data":"` + strings.Repeat("x", 40<<10) + `"}}]`
	props := `{"properties":[{"type":"olm.package","value":{"packageName":"cachepkg","version":"1.0.0"}}]}`
	owned := v1alpha1.CustomResourceDefinitions{Owned: []v1alpha1.CRDDescription{{Name: "bigs.example.com", Version: "v1", Kind: "Big"}}}
	newCSV := func(ns, name string, labels map[string]string) *v1alpha1.ClusterServiceVersion {
		return &v1alpha1.ClusterServiceVersion{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: map[string]string{
				"alm-examples": almExamples, "example.com/unused": strings.Repeat("u", 4<<10), cleanup.PropertiesAnnotation: props,
				olm.OperatorNamespaceAnnotation: operatorNS}},
			Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"},
				CustomResourceDefinitions: owned},
		}
	}
	for i := range 3 {
		if err := env.Client.Create(ctx, newCSV(operatorNS, fmt.Sprintf("cachepkg-%d.v1.0.0", i), map[string]string{"example.com/team": "a"})); err != nil {
			t.Fatal(err)
		}
	}
	// A tenant's look-alikes: labelled as a copy, no status.reason (only OLM writes that). The
	// first holds no finalizer (the webhook gives none to a CSV labelled as a copy); the second
	// holds olmguard's, as a guarded CSV relabelled later does, and the webhook labels it tracked;
	// the third is written where the webhook is not called, so only the tracker can label it.
	lookalike := newCSV(targets[0], "lookalike.v1.0.0", map[string]string{olm.CopiedFromLabel: targets[0]})
	lookalike.Annotations[olm.OperatorNamespaceAnnotation] = targets[0]
	guarded := newCSV(targets[0], "guarded.v1.0.0", map[string]string{olm.CopiedFromLabel: targets[0]})
	guarded.Annotations[olm.OperatorNamespaceAnnotation] = targets[0]
	guarded.Finalizers = []string{olmguard.CleanupFinalizer}
	unseen := newCSV(olmguard.DefaultNamespace, "unseen.v1.0.0", map[string]string{olm.CopiedFromLabel: targets[0]})
	unseen.Annotations[olm.OperatorNamespaceAnnotation] = olmguard.DefaultNamespace
	unseen.Finalizers = []string{olmguard.CleanupFinalizer}
	for _, c := range []*v1alpha1.ClusterServiceVersion{lookalike, guarded, unseen} {
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { releaseAndDelete(t, c) })
	}
	if guarded.Labels[olmguard.CleanupTrackedLabel] == "" {
		t.Errorf("the webhook did not label %s, a CSV labelled %s holding olmguard's finalizer, %s", guarded.Name, olm.CopiedFromLabel, olmguard.CleanupTrackedLabel)
	}
	if unseen.Labels[olmguard.CleanupTrackedLabel] != "" {
		t.Fatalf("the webhook labelled %s in %s, which it does not serve: the test cannot check the tracker", unseen.Name, olmguard.DefaultNamespace)
	}
	// OLM's copies, written as the olm-operator writes them: the original's annotations, the
	// copied-from label, then status.reason Copied.
	var wg sync.WaitGroup
	errs := make(chan error, namespaces)
	for _, ns := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range copiesPerNamespace {
				c := newCSV(ns, fmt.Sprintf("cachepkg-%d.v1.0.0", i), map[string]string{olm.CopiedFromLabel: operatorNS, "example.com/team": "a"})
				if err := env.Client.Create(ctx, c); err != nil {
					errs <- err
					return
				}
				c.Status = v1alpha1.ClusterServiceVersionStatus{Phase: v1alpha1.CSVPhaseSucceeded, Reason: v1alpha1.CSVReasonCopied, Message: "The operator is running in " + operatorNS}
				if err := env.Client.Status().Update(ctx, c); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	// An operator's plan: its steps are the cleanup's to read live, never the cache's.
	plan := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: targets[0], Name: "install-cache", Annotations: map[string]string{"example.com/unused": "u"}},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"cachepkg-0.v1.0.0"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true}}
	if err := env.Client.Create(ctx, plan); err != nil {
		t.Fatal(err)
	}
	plan.Status = v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseComplete, CatalogSources: []string{}}
	for _, kind := range []string{"CustomResourceDefinition", "ClusterRole", "ClusterServiceVersion"} {
		plan.Status.Plan = append(plan.Status.Plan, &v1alpha1.Step{Resolving: "cachepkg-0.v1.0.0", Status: "Created",
			Resource: v1alpha1.StepResource{Kind: kind, Name: strings.ToLower(kind), Manifest: strings.Repeat("m", 4<<10)}})
	}
	if err := env.Client.Status().Update(ctx, plan); err != nil {
		t.Fatal(err)
	}

	reads := &csvReads{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(reads.wrap)
	opts := testenv.ManagerOptions()
	mgr, err := controller.NewManager(cfg, opts, setup.DefaultController().Reconcilers()...)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the controller's caches never synced")
	}
	testenv.Eventually(t, "the tracker labels "+unseen.Name+" and the cache holds it", func(ctx context.Context) (bool, error) {
		err := mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(unseen), &v1alpha1.ClusterServiceVersion{})
		return err == nil, client.IgnoreNotFound(err)
	})

	allowedAnnotations := map[string]bool{olm.OperatorNamespaceAnnotation: true, olmguard.CleanupAnnotation: true, cleanup.PropertiesAnnotation: true}
	allowedLabels := map[string]bool{olm.CopiedFromLabel: true}
	cached, tracked := 0, map[string]bool{}
	for _, ns := range append([]string{operatorNS, olmguard.DefaultNamespace}, targets...) {
		list := &v1alpha1.ClusterServiceVersionList{}
		if err := mgr.GetCache().List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			id := c.Namespace + "/" + c.Name
			cached++
			for k := range c.Annotations {
				if !allowedAnnotations[k] {
					t.Errorf("%s: annotation %s in the controller's cache, which no reconciler reads", id, k)
				}
			}
			for k := range c.Labels {
				if !allowedLabels[k] {
					t.Errorf("%s: label %s in the controller's cache, which no reconciler reads", id, k)
				}
			}
			body, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if _, copied := c.Labels[olm.CopiedFromLabel]; copied {
				// Only the look-alikes holding olmguard's finalizer, with what the cleanup reads.
				tracked[id] = true
				if len(c.Spec.CustomResourceDefinitions.Owned) != 1 || c.Annotations[cleanup.PropertiesAnnotation] != props || !cleanup.HasFinalizer(c.Finalizers) {
					t.Errorf("%s: a CSV labelled %s in the controller's cache that is not a tracked look-alike, or lost what the cleanup reads: %s", id, olm.CopiedFromLabel, body)
				}
				continue
			}
			if c.Annotations[cleanup.PropertiesAnnotation] != props {
				t.Errorf("%s: the properties annotation the cleanup reads is not in the cache", id)
			}
			if len(body) > 4<<10 {
				t.Errorf("%s: an original takes %d bytes in the cache as JSON, want at most 4 KiB", id, len(body))
			}
		}
	}
	for _, c := range []*v1alpha1.ClusterServiceVersion{guarded, unseen} {
		if !tracked[c.Namespace+"/"+c.Name] {
			t.Errorf("%s/%s, labelled %s and holding olmguard's finalizer, is not in the controller's cache", c.Namespace, c.Name, olm.CopiedFromLabel)
		}
	}
	if len(tracked) != 2 {
		t.Errorf("%d CSVs labelled %s in the controller's cache, want the 2 holding olmguard's finalizer: %v", len(tracked), olm.CopiedFromLabel, tracked)
	}
	t.Logf("%d CSVs in the controller's cache, of %d written (%d of them OLM's copies)", cached, 3+3+namespaces*copiesPerNamespace, namespaces*copiesPerNamespace)
	checkPagedCSVLists(t, reads, opts.CacheListPageSize, cached)
	// And no copy leaked in another form: the Subscriptions, Jobs and pods the reconcilers read
	// carry no label or annotation outside their declarations either.
	subs := &v1alpha1.SubscriptionList{}
	if err := mgr.GetCache().List(ctx, subs); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs.Items {
		for k := range s.Annotations {
			if k != olmguard.ResyncAnnotation {
				t.Errorf("Subscription %s/%s: annotation %s in the controller's cache, which no reconciler reads", s.Namespace, s.Name, k)
			}
		}
		if len(s.Labels) > 0 {
			t.Errorf("Subscription %s/%s: labels %v in the controller's cache, which no reconciler reads", s.Namespace, s.Name, s.Labels)
		}
	}
	cachedPlan := &v1alpha1.InstallPlan{}
	if err := mgr.GetCache().Get(ctx, client.ObjectKeyFromObject(plan), cachedPlan); err != nil {
		t.Fatal(err)
	}
	if len(cachedPlan.Status.Plan) > 0 || cachedPlan.Status.DroppedSteps != 3 || !cachedPlan.Status.Populated() || len(cachedPlan.Annotations) > 0 {
		t.Errorf("InstallPlan in the controller's cache with %d steps (%d dropped), populated %v, annotations %v: want none, 3, true and none",
			len(cachedPlan.Status.Plan), cachedPlan.Status.DroppedSteps, cachedPlan.Status.Populated(), cachedPlan.Annotations)
	}
	pods := &corev1.PodList{}
	if err := mgr.GetCache().List(ctx, pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if _, ok := p.Labels[olm.CatalogSourceLabel]; !ok || len(p.Labels) > 1 || len(p.Annotations) > 0 {
			t.Errorf("pod %s/%s cached with labels %v and annotations %v: only catalog pods and their olm.catalogSource label", p.Namespace, p.Name, p.Labels, p.Annotations)
		}
	}
}

// releaseAndDelete takes olmguard's finalizer off c and deletes it: the test's CSVs outlive no test.
func releaseAndDelete(t *testing.T, c *v1alpha1.ClusterServiceVersion) {
	ctx := context.Background()
	got := &v1alpha1.ClusterServiceVersion{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(c), got); err != nil {
		return
	}
	if len(got.Finalizers) > 0 {
		got.Finalizers = nil
		if err := env.Client.Update(ctx, got); err != nil {
			t.Logf("releasing %s/%s: %v", c.Namespace, c.Name, err)
		}
	}
	if err := client.IgnoreNotFound(env.Client.Delete(ctx, got)); err != nil {
		t.Logf("deleting %s/%s: %v", c.Namespace, c.Name, err)
	}
}
