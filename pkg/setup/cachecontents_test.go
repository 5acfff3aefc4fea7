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

// TestControllerCacheHoldsOnlyWhatReconcilersRead (issue 32, acceptance line 4): a few hundred of
// OLM's copied CSVs carrying a 40 KB alm-examples annotation, originals with annotations no
// reconciler reads, and one CSV a tenant labelled olm.copiedFrom itself. After the controller's
// caches synced (every reconciler running), the CSVs read through the manager's cache show: no
// annotation or label outside the keys the reconcilers declare, OLM's copies (status.reason Copied)
// as metadata and their reason only, each cached CSV small, and the tenant's look-alike kept with
// the fields the cleanup reads (it is not OLM's copy: issue 31, items 2 and 7). A property of the
// cache, not a timing: nothing is measured.
//
// Fails before the fix: every CSV was cached with all its annotations (alm-examples, 40 KB, on
// each of the 300 copies) and the copies with their spec.
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
	// The tenant's look-alike: labelled as a copy, no status.reason (only OLM writes that).
	lookalike := newCSV(targets[0], "lookalike.v1.0.0", map[string]string{olm.CopiedFromLabel: targets[0]})
	lookalike.Annotations[olm.OperatorNamespaceAnnotation] = targets[0]
	if err := env.Client.Create(ctx, lookalike); err != nil {
		t.Fatal(err)
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

	allowedAnnotations := map[string]bool{olm.OperatorNamespaceAnnotation: true, olmguard.CleanupAnnotation: true, cleanup.PropertiesAnnotation: true}
	allowedLabels := map[string]bool{olm.CopiedFromLabel: true}
	copies, largestCopy := 0, 0
	for _, ns := range append([]string{operatorNS}, targets...) {
		list := &v1alpha1.ClusterServiceVersionList{}
		if err := mgr.GetCache().List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			id := c.Namespace + "/" + c.Name
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
			switch {
			case c.Status.Reason == v1alpha1.CSVReasonCopied:
				copies++
				largestCopy = max(largestCopy, len(body))
				if len(c.Spec.CustomResourceDefinitions.Owned) > 0 || c.Spec.DisplayName != "" || c.Status.Message != "" || c.Annotations[cleanup.PropertiesAnnotation] != "" {
					t.Errorf("%s: OLM's copy cached with more than its metadata and reason: %s", id, body)
				}
				if len(body) > 1<<10 {
					t.Errorf("%s: OLM's copy takes %d bytes in the cache as JSON, want at most 1 KiB", id, len(body))
				}
			case c.Namespace == lookalike.Namespace && c.Name == lookalike.Name:
				if len(c.Spec.CustomResourceDefinitions.Owned) != 1 || c.Annotations[cleanup.PropertiesAnnotation] != props {
					t.Errorf("%s: the tenant's look-alike lost what the cleanup reads: %s", id, body)
				}
			default:
				if c.Annotations[cleanup.PropertiesAnnotation] != props {
					t.Errorf("%s: the properties annotation the cleanup reads is not in the cache", id)
				}
				if len(body) > 4<<10 {
					t.Errorf("%s: an original takes %d bytes in the cache as JSON, want at most 4 KiB", id, len(body))
				}
			}
		}
	}
	t.Logf("%d of OLM's copies cached, the largest %d bytes as JSON", copies, largestCopy)
	checkPagedCSVLists(t, reads, opts.CacheListPageSize, copies)
	if want := namespaces * copiesPerNamespace; copies != want {
		t.Errorf("%d of OLM's copies in the cache, want %d (the test needs all of them to check)", copies, want)
	}
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
