package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	olmguarduninstall "github.com/olmguard/olmguard/pkg/uninstall"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

var widgetGVK = schema.GroupVersionKind{Group: "f3.example.com", Version: "v1", Kind: "Widget"}

// widgetBundle is version v of an operator that owns widgets.f3.example.com and opts in to cleanup.
func widgetBundle(pkg string, v int) olmsim.Bundle {
	b := olmsim.Bundle{Package: pkg, Channel: "stable", CSVName: fmt.Sprintf("%s.v%d", pkg, v), Version: fmt.Sprintf("%d.0.0", v),
		Image:          fmt.Sprintf("registry.example/%s-bundle:v%d", pkg, v),
		OwnedCRDs:      []v1alpha1.CRDDescription{{Name: "widgets.f3.example.com", Version: "v1", Kind: "Widget"}},
		CleanupEnabled: true, WebhookDeployment: pkg + "-webhook", BundledClusterRole: pkg + "-reader"}
	if v > 1 {
		b.Replaces = fmt.Sprintf("%s.v%d", pkg, v-1)
	}
	return b
}

// installOperator serves cat, creates an OperatorGroup in ns (targeting targets, all namespaces
// without) and an automatic Subscription to package pkg, and installs it as OLM does.
func installOperator(t *testing.T, ctx context.Context, sim *olmsim.Sim, cat *olmsim.Catalog, ns, pkg string, targets ...string) *v1alpha1.Subscription {
	t.Helper()
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.CreateOperatorGroup(ctx, ns, "og", targets...); err != nil {
		t.Fatal(err)
	}
	sub, err := sim.CreateSubscription(ctx, ns, pkg, cat, pkg, v1alpha1.ApprovalAutomatic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Install(ctx, ns, false); err != nil {
		t.Fatal(err)
	}
	return sub
}

// createOperands creates namespace ns and n custom resources of kind gvk in it.
func createOperands(t *testing.T, ctx context.Context, c *cluster.Cluster, gvk schema.GroupVersionKind, ns string, n int) {
	t.Helper()
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	if err := parallel(n, 4, func(i int) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		u.SetName(fmt.Sprintf("o%d", i))
		return c.Client.Create(ctx, u)
	}); err != nil {
		t.Fatal(err)
	}
}

// countOperands counts the custom resources of kind gvk in namespace ns.
func countOperands(t *testing.T, ctx context.Context, c *cluster.Cluster, gvk schema.GroupVersionKind, ns string) int {
	t.Helper()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}

func getCSV(ctx context.Context, c *cluster.Cluster, ns, name string) (*v1alpha1.ClusterServiceVersion, error) {
	csv := &v1alpha1.ClusterServiceVersion{}
	return csv, c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, csv)
}

func waitCSVGone(t *testing.T, ctx context.Context, c *cluster.Cluster, ns, name string, within time.Duration) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		_, err := getCSV(ctx, c, ns, name)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		csv, _ := getCSV(ctx, c, ns, name)
		t.Fatalf("CSV %s/%s still there after %s (finalizers %v)", ns, name, within, csv.Finalizers)
	}
}

// csvsReconciledUpTo is a barrier for the controller's CSV reconciler: it creates a CSV in a
// namespace of its own (the webhook gives it olmguard's finalizer), deletes it and waits until the
// controller has run its cleanup and released it. The reconciler works through its queue in
// order, so by then it has reconciled every CSV written before.
func csvsReconciledUpTo(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	ns := c.FreshNamespace(ctx, t, "f3-marker")
	csv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": olm.V1alpha1APIVersion, "kind": olm.ClusterServiceVersionKind,
		"metadata": map[string]any{"namespace": ns, "name": "marker.v1"},
		"spec":     map[string]any{"displayName": "marker", "install": map[string]any{"strategy": "deployment"}}}}
	if err := c.Client.Create(ctx, csv); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(csv.GetFinalizers(), olmguard.CleanupFinalizer) {
		t.Fatalf("marker CSV created with finalizers %v: the webhook must add olmguard's", csv.GetFinalizers())
	}
	if err := c.Client.Delete(ctx, csv); err != nil {
		t.Fatal(err)
	}
	waitCSVGone(t, ctx, c, ns, "marker.v1", testenv.Patience)
}

// uninstall deletes the Subscription and the CSV as a user does, then lets OLM run its finalizer.
func uninstall(t *testing.T, ctx context.Context, c *cluster.Cluster, sim *olmsim.Sim, sub *v1alpha1.Subscription) {
	t.Helper()
	if err := scenario.Uninstall(ctx, c.Client, sub); err != nil {
		t.Fatal(err)
	}
	if err := sim.SyncCSVs(ctx, sub.Namespace); err != nil {
		t.Fatal(err)
	}
}

// TestF3CSVCleanup: olmguard's cleanup finalizer survives a stopped controller, never harms an
// upgrade or another tenant, and resumes after being killed.
func TestF3CSVCleanup(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	startWebhook(t, c)
	waitWebhookActive(t, ctx, c)
	sim := newSim(t, c, "olm-f3", olmsim.V0_46)

	t.Run("controller stopped: the CSV waits; controller started: cleanup completes", func(t *testing.T) {
		cat := scenario.GammaCatalog("f3-stopped")
		sub, err := scenario.InstallGamma(ctx, sim, cat, "f3-stopped")
		if err != nil {
			t.Fatal(err)
		}
		csv, err := getCSV(ctx, c, "f3-stopped", "gamma.v1.0.0")
		if err != nil || !slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
			t.Fatalf("installed CSV finalizers %v (err %v): the webhook must add olmguard.io/cleanup", csv.Finalizers, err)
		}
		uninstall(t, ctx, c, sim, sub)
		// OLM syncs the deleted CSV again (it requeues it): its own finalizer is gone, olmguard's
		// stays, and nothing else runs that could release it.
		if err := sim.SyncCSVs(ctx, "f3-stopped"); err != nil {
			t.Fatal(err)
		}
		if csv, err = getCSV(ctx, c, "f3-stopped", "gamma.v1.0.0"); err != nil || csv.DeletionTimestamp == nil {
			t.Fatalf("with the controller stopped the CSV must stay terminating (err %v)", err)
		}
		// Nobody but the controller may drop the finalizer while the cleanup is pending.
		ops := cleanup.RemoveFinalizerPatch(csv.Finalizers, olmguard.CleanupFinalizer)
		body, _ := json.Marshal(ops)
		err = sim.Client.Patch(ctx, csv, client.RawPatch(types.JSONPatchType, body))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cleanup is pending") {
			t.Fatalf("removing olmguard's finalizer as OLM's service account: %v, want denied by the cleanup-finalizer policy", err)
		}
		p := startController(t, c)
		waitCSVGone(t, ctx, c, "f3-stopped", "gamma.v1.0.0", testenv.Patience)
		p.Stop()
		// A bundled ClusterRole installed once carries only olm.managed: nothing ties it to the CSV,
		// so it stays (OLM labels it olm.owner when it applies it again; see the upgrade test).
		if l, err := scenario.CountLeftovers(ctx, c.Client, cat, "f3-stopped"); err != nil || l.Labelled+l.Webhooks+l.AuthReader != 0 {
			t.Fatalf("leftovers after cleanup: %+v (err %v)", l, err)
		}
	})

	ctrl := startController(t, c)

	var v3 *v1alpha1.Subscription
	cat := &olmsim.Catalog{Name: "f3-widgets", Bundles: []olmsim.Bundle{widgetBundle("epsilon", 1)}}
	t.Run("upgrades v1 -> v2 -> v3 with operand cleanup delete no custom resource", func(t *testing.T) {
		sub := installOperator(t, ctx, sim, cat, "f3-up", "epsilon", "f3-up-team")
		createOperands(t, ctx, c, widgetGVK, "f3-up-team", 5)
		for v := 2; v <= 3; v++ {
			cat.Bundles = append(cat.Bundles, widgetBundle("epsilon", v))
			if _, err := sim.Install(ctx, "f3-up", false); err != nil {
				t.Fatal(err)
			}
			waitCSVGone(t, ctx, c, "f3-up", fmt.Sprintf("epsilon.v%d", v-1), testenv.Patience)
		}
		if n := countOperands(t, ctx, c, widgetGVK, "f3-up-team"); n != 5 {
			t.Fatalf("%d of 5 custom resources left after two upgrades", n)
		}
		// The successor still serves the webhook: its auth-reader RoleBinding must survive upgrades.
		rb := types.NamespacedName{Namespace: "kube-system", Name: olm.AuthReaderRoleBindingName(olm.ServiceName("epsilon-webhook"))}
		if err := c.Client.Get(ctx, rb, &rbacv1.RoleBinding{}); err != nil {
			t.Fatalf("auth-reader RoleBinding deleted by an upgrade: %v", err)
		}
		v3 = sub
	})

	t.Run("copies never get the finalizer", func(t *testing.T) {
		csvsReconciledUpTo(t, ctx, c) // the controller's backfill has seen the copies
		cp, err := getCSV(ctx, c, "f3-up-team", "epsilon.v3")
		if err != nil {
			t.Fatalf("no copied CSV in the target namespace: %v", err)
		}
		if !cp.IsCopied() || slices.Contains(cp.Finalizers, olmguard.CleanupFinalizer) {
			t.Fatalf("copied CSV finalizers %v", cp.Finalizers)
		}
	})

	t.Run("a full update that drops olmguard's finalizer gets it back", func(t *testing.T) {
		csv, err := getCSV(ctx, c, "f3-up", "epsilon.v3")
		if err != nil {
			t.Fatal(err)
		}
		csv.Finalizers = []string{olm.CSVCleanupFinalizer} // a writer with a stale view, as OLM's full Update
		if err := sim.Client.Update(ctx, csv); err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) || !slices.Contains(csv.Finalizers, olm.CSVCleanupFinalizer) {
			t.Fatalf("finalizers after OLM's update: %v, want both", csv.Finalizers)
		}
	})

	t.Run("a CSV claiming another tenant's CRD deletes none of its resources", func(t *testing.T) {
		hostile := &olmsim.Catalog{Name: "f3-hostile", Bundles: []olmsim.Bundle{widgetBundle("mallory", 1)}}
		sub := installOperator(t, ctx, sim, hostile, "f3-hostile", "mallory") // all namespaces
		uninstall(t, ctx, c, sim, sub)
		waitCSVGone(t, ctx, c, "f3-hostile", "mallory.v1", testenv.Patience)
		if n := countOperands(t, ctx, c, widgetGVK, "f3-up-team"); n != 5 {
			t.Fatalf("the tenant has %d of 5 custom resources left", n)
		}
	})

	t.Run("a real uninstall deletes custom resources in target namespaces only", func(t *testing.T) {
		if v3 == nil {
			t.Skip("upgrade subtest failed")
		}
		createOperands(t, ctx, c, widgetGVK, "f3-up-elsewhere", 3)
		uninstall(t, ctx, c, sim, v3)
		waitCSVGone(t, ctx, c, "f3-up", "epsilon.v3", testenv.Patience)
		if n := countOperands(t, ctx, c, widgetGVK, "f3-up-team"); n != 0 {
			t.Errorf("%d custom resources left in the target namespace", n)
		}
		if n := countOperands(t, ctx, c, widgetGVK, "f3-up-elsewhere"); n != 3 {
			t.Errorf("%d of 3 custom resources left outside the target namespaces", n)
		}
		// The bundled ClusterRole, labelled olm.owner=epsilon.v3 by the upgrades (OLM issue #2985),
		// and the kube-system auth-reader RoleBinding go with the last CSV.
		if err := c.Client.Get(ctx, types.NamespacedName{Name: "epsilon-reader"}, &rbacv1.ClusterRole{}); !apierrors.IsNotFound(err) {
			t.Errorf("bundled ClusterRole epsilon-reader left behind (err %v)", err)
		}
		rb := types.NamespacedName{Namespace: "kube-system", Name: olm.AuthReaderRoleBindingName(olm.ServiceName("epsilon-webhook"))}
		if err := c.Client.Get(ctx, rb, &rbacv1.RoleBinding{}); !apierrors.IsNotFound(err) {
			t.Errorf("auth-reader RoleBinding %s left behind (err %v)", rb, err)
		}
	})
	t.Run("kubectl olmguard uninstall leaves nothing stuck", func(t *testing.T) {
		ctrl.Stop() // what scaling olmguard's Deployments to zero does in a cluster
		// A CSV deleted while the controller is away waits on olmguard's finalizer...
		sub, err := scenario.InstallGamma(ctx, sim, scenario.GammaCatalog("f3-uninstall"), "f3-uninstall")
		if err != nil {
			t.Fatal(err)
		}
		uninstall(t, ctx, c, sim, sub)
		if csv, err := getCSV(ctx, c, "f3-uninstall", "gamma.v1.0.0"); err != nil || csv.DeletionTimestamp == nil {
			t.Fatalf("want the CSV terminating on olmguard's finalizer (err %v)", err)
		}
		// ...until olmguard is uninstalled.
		var out strings.Builder
		if err := olmguarduninstall.Run(ctx, c.Client, &out, olmguarduninstall.DefaultStopTimeout); err != nil {
			t.Fatal(err)
		}
		waitCSVGone(t, ctx, c, "f3-uninstall", "gamma.v1.0.0", testenv.Patience)
		csvs := &v1alpha1.ClusterServiceVersionList{}
		if err := c.Client.List(ctx, csvs); err != nil {
			t.Fatal(err)
		}
		for _, csv := range csvs.Items {
			if slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
				t.Fatalf("CSV %s/%s still has olmguard's finalizer after uninstall", csv.Namespace, csv.Name)
			}
		}
		m := &admissionregistrationv1.MutatingWebhookConfigurationList{}
		if err := c.Client.List(ctx, m, client.MatchingLabels{olmguard.NameLabel: olmguard.Name}); err != nil || len(m.Items) != 0 {
			t.Fatalf("webhook configurations left: %d (err %v)", len(m.Items), err)
		}
		t.Log(out.String())
	})

}
