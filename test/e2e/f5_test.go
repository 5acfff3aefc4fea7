package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
)

// f5Wait is how long after its node turns NotReady a catalog pod must be replaced: the default
// --catalog-pod-grace (30s) plus 15s.
const f5Wait = 45 * time.Second

// runningCatalogPod waits for a Running catalog pod of the catalog on a Ready node.
func runningCatalogPod(ctx context.Context, c *cluster.Cluster, ns, catalog string) (*corev1.Pod, error) {
	var found *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{olm.CatalogSourceLabel: catalog}); err != nil {
			return false, err
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}

// TestBaselineF5CatalogPodStuckOnFailedNode: with stock OLM (the newest release, with the #3208
// fixes) a catalog pod stays bound to a node whose heartbeats stopped until taint-based eviction,
// minutes later; the catalog is unavailable meanwhile.
func TestBaselineF5CatalogPodStuckOnFailedNode(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sim := newSim(t, c, "olm-f5-baseline", olmsim.V0_46)
	cat := &olmsim.Catalog{Name: "f5-baseline"}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go sim.RunCatalogOperator(runCtx, 2*time.Second)

	pod, err := runningCatalogPod(ctx, c, cat.Namespace, cat.Name)
	if err != nil {
		t.Fatalf("no running catalog pod: %v", err)
	}
	node := pod.Spec.NodeName
	if err := c.FailNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.RestoreNode(context.Background(), node)
		_ = c.WaitNodeReady(context.Background(), node, true)
	})
	if err := c.WaitNodeReady(ctx, node, false); err != nil {
		t.Fatalf("node %s never turned NotReady: %v", node, err)
	}
	notReady := time.Now()
	time.Sleep(f5Wait)
	got := &corev1.Pod{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatalf("catalog pod %s gone %s after node %s turned NotReady: stock OLM should still be stuck (%v)", pod.Name, time.Since(notReady).Round(time.Second), node, err)
	}
	if got.Spec.NodeName != node {
		t.Fatalf("pod moved to %s", got.Spec.NodeName)
	}
	replacement, _ := runningOn(ctx, c, cat, node)
	if replacement != "" {
		t.Fatalf("a replacement pod %s runs on %s: stock OLM should not have made one", replacement, node)
	}
	t.Logf("%s after node %s turned NotReady the catalog pod %s is still bound to it (%s)", time.Since(notReady).Round(time.Second), node, pod.Name, fmt.Sprint(got.Status.Phase))
}

// runningOn returns a Running catalog pod of cat on a node other than exclude.
func runningOn(ctx context.Context, c *cluster.Cluster, cat *olmsim.Catalog, exclude string) (string, error) {
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(cat.Namespace), client.MatchingLabels{olm.CatalogSourceLabel: cat.Name}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName != exclude && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			return p.Name + " on " + p.Spec.NodeName, nil
		}
	}
	return "", nil
}
