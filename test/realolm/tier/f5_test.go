package tier

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// f5StockWindow is how long stock OLM is watched, after the node turned NotReady, for a
// replacement of its registry pod. Nothing happening is the claim: a slow machine cannot fail it.
const f5StockWindow = 20 * time.Second

// f5Grace is olmguard's --catalog-pod-grace in this test: short, so the tier stays quick.
const f5Grace = 5 * time.Second

// TestF5CatalogPodRecovered: real OLM runs an image-backed catalog as a bare registry pod on a kwok
// node. When that node stops its heartbeats, stock OLM keeps the pod (it counts a pod as dead only
// once the taint manager evicts it, minutes later: OLM #3208); with olmguard's controller the pod
// is deleted after the grace period and OLM itself creates its replacement on a Ready node.
func TestF5CatalogPodRecovered(t *testing.T) {
	declare(t, "F5: catalog pods off dead nodes (#3208)", false)
	c, o := realOLM(t)
	c.SkipUnlessKwok(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*testenv.Patience)
	defer cancel()
	cs := realolm.NewRegistryCatalog(o.CatalogNamespace, "f5-registry")
	if err := c.Client.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), cs) })
	cat := &olmsim.Catalog{Name: cs.Name, Namespace: cs.Namespace}
	// OLM replaces its first pod once while the catalog's Service and ServiceAccount appear; a node
	// failed before that would find the replacement elsewhere.
	settleRegistryPod(t, c, cs)

	stock, err := scenario.FailCatalogNode(ctx, c, cat, f5StockWindow)
	if err != nil {
		t.Fatal(err)
	}
	if stock.Recovered {
		t.Fatalf("stock OLM %s replaced the registry pod of NotReady node %s after %s: #3208 no longer reproduces", o.Version, stock.Node, stock.Recovery)
	}
	t.Logf("stock OLM %s: %s after node %s turned NotReady, no registry pod runs elsewhere", o.Version, f5StockWindow, stock.Node)

	settleRegistryPod(t, c, cs)
	procs.RunController(t, c.Kubeconfig, "--catalog-pod-grace="+f5Grace.String(), "--catalog-pod-deletions-per-minute=600")
	before, err := scenario.RunningCatalogPod(ctx, c.Client, cat, "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := scenario.FailCatalogNode(ctx, c, cat, f5Grace+testenv.Patience)
	if err != nil {
		t.Fatal(err)
	}
	if !out.Recovered {
		t.Fatalf("with olmguard, no registry pod running off node %s %s after it turned NotReady", out.Node, f5Grace+testenv.Patience)
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(before), &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("the stranded registry pod %s is still there (err=%v)", before.Name, err)
	}
	after, err := scenario.RunningCatalogPod(ctx, c.Client, cat, out.Node)
	if err != nil {
		t.Fatal(err)
	}
	// OLM, not olmguard, made the replacement: it is owned by the CatalogSource as OLM owns its pods.
	if ref := metav1.GetControllerOf(after); ref == nil || ref.Kind != "CatalogSource" || ref.Name != cs.Name {
		t.Errorf("replacement pod %s is not controlled by CatalogSource %s: %v", after.Name, cs.Name, after.OwnerReferences)
	}
	t.Logf("with olmguard: OLM %s runs registry pod %s on %s, %s after node %s turned NotReady (grace %s)",
		o.Version, after.Name, after.Spec.NodeName, out.Recovery.Round(100*time.Millisecond), out.Node, f5Grace)
	checkLogs(t, o)
}

// settleRegistryPod waits until the catalog has had one and the same registry pod, Running, for
// three polls in a row.
func settleRegistryPod(t *testing.T, c *cluster.Cluster, cs *v1alpha1.CatalogSource) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	must(realolm.SettledRegistryPod(ctx, c.Client, cs))(t)
}
