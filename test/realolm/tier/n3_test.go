package tier

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// n3StockWindow is how long stock OLM is watched, after its registry pod turned Failed, for a
// replacement. Nothing happening is the claim: a slow machine cannot fail it.
const n3StockWindow = 20 * time.Second

// TestN3FailedCatalogPodRecovered: the kubelet evicts OLM's registry pod on a Ready node (phase
// Failed, reason Evicted, no DisruptionTarget condition, no deletionTimestamp: what memory
// pressure leaves). Stock OLM keeps it as its registry server, as its health check never reads the
// phase (OLM #3459, #3519, OCPBUGS-46474; v0.46.0 still does without DisruptionTarget), so the
// catalog serves nothing; doctor reports it (F5 CatalogPodFailed). With olmguard's controller the
// pod is deleted and OLM itself creates the replacement.
//
// The eviction is written as the kubelet writes it, to the pod's status. kwok (its default pod
// stages) rewrites a pod's status only while the pod has no podIP (it then makes it Running) or
// once it has a deletionTimestamp (it removes it): the patch keeps the podIP and sets no
// deletionTimestamp, so kwok leaves the Failed status as written. The test checks that it stays so
// for the whole stock window.
func TestN3FailedCatalogPodRecovered(t *testing.T) {
	declare(t, "N3: Failed catalog pods OLM keeps (#3459, #3519)", true)
	c, o := realOLM(t)
	c.SkipUnlessKwok(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*testenv.Patience)
	defer cancel()
	cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: o.CatalogNamespace, Name: "n3-registry"},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: "olmguard.test/n3-catalog:latest", DisplayName: "n3"}}
	if err := c.Client.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), cs) })
	settleRegistryPod(t, c, cs)
	pods := catalogPods(t, ctx, c, cs)
	if len(pods) != 1 {
		t.Fatalf("want one registry pod of %s, have %d", cs.Name, len(pods))
	}
	dead := &pods[0]
	evict(t, ctx, c, dead)
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: dead.Spec.NodeName}, node); err != nil || !cluster.NodeReady(node) {
		t.Fatalf("node %s of the evicted pod is not Ready (err=%v): this scenario is about a Ready node", dead.Spec.NodeName, err)
	}

	// Stock OLM: the Failed pod stays the catalog's only pod for the whole window.
	deadline := time.Now().Add(n3StockWindow)
	for time.Now().Before(deadline) {
		for _, p := range catalogPods(t, ctx, c, cs) {
			switch {
			case p.UID != dead.UID:
				t.Fatalf("stock OLM %s created registry pod %s beside the Failed %s: #3459/#3519 no longer reproduce", o.Version, p.Name, dead.Name)
			case p.Status.Phase != corev1.PodFailed:
				t.Fatalf("the evicted pod %s turned %s again: something (kwok?) rewrote its status", p.Name, p.Status.Phase)
			}
		}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(dead), &corev1.Pod{}); err != nil {
			t.Fatalf("stock OLM %s removed the Failed registry pod %s (err=%v): #3459/#3519 no longer reproduce", o.Version, dead.Name, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("stock OLM %s: %s after its registry pod %s turned Failed (Evicted) on Ready node %s, it keeps it and runs no other",
		o.Version, n3StockWindow, dead.Name, dead.Spec.NodeName)
	_, report := doctorReport(t, c, cs.Namespace)
	f := finding(t, report, "CatalogPodFailed", dead.Name)
	t.Logf("doctor: %s %s: %s (%s)", f.Class, f.Check, f.Problem, f.Evidence)

	// With olmguard: the Failed pod is deleted, and OLM runs a new one.
	procs.RunController(t, c.Kubeconfig)
	var after *corev1.Pod
	testenv.EventuallyExplained(t, "the Failed registry pod deleted and a new one Running", func(ctx context.Context) (bool, string, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(dead), &corev1.Pod{})
		if err == nil || !apierrors.IsNotFound(err) {
			return false, fmt.Sprintf("Failed pod %s still there (err=%v)", dead.Name, err), nil
		}
		pods, err := listCatalogPods(ctx, c, cs)
		if err != nil {
			return false, "", err
		}
		for _, p := range pods {
			if p.UID != dead.UID && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				after = &p
				return true, "", nil
			}
		}
		return false, "Failed pod gone, no registry pod Running yet", nil
	})
	// OLM, not olmguard, made the replacement: it is owned by the CatalogSource as OLM owns its pods.
	if ref := metav1.GetControllerOf(after); ref == nil || ref.Kind != olm.CatalogSourceKind || ref.Name != cs.Name {
		t.Errorf("replacement pod %s is not controlled by CatalogSource %s: %v", after.Name, cs.Name, after.OwnerReferences)
	}
	t.Logf("with olmguard: OLM %s runs registry pod %s on %s in place of the Failed %s", o.Version, after.Name, after.Spec.NodeName, dead.Name)
	checkLogs(t, o)
}

// catalogPods lists the pods of cs (label olm.catalogSource), failing the test if it cannot.
func catalogPods(t *testing.T, ctx context.Context, c *cluster.Cluster, cs *v1alpha1.CatalogSource) []corev1.Pod {
	t.Helper()
	pods, err := listCatalogPods(ctx, c, cs)
	if err != nil {
		t.Fatalf("listing the pods of %s: %v", cs.Name, err)
	}
	return pods
}

func listCatalogPods(ctx context.Context, c *cluster.Cluster, cs *v1alpha1.CatalogSource) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := c.Client.List(ctx, pods, client.InNamespace(cs.Namespace), client.MatchingLabels{olm.CatalogSourceLabel: cs.Name})
	return pods.Items, err
}

// evict writes to p's status what the kubelet writes when it evicts a pod under memory pressure:
// phase Failed, reason Evicted, the containers terminated, not Ready; no DisruptionTarget
// condition, which OLM v0.32 on would take as dead. podIP and hostIP stay, as the kubelet leaves
// them (and kwok rewrites a pod without a podIP).
func evict(t *testing.T, ctx context.Context, c *cluster.Cluster, p *corev1.Pod) {
	t.Helper()
	now := metav1.Now().UTC().Format(time.RFC3339)
	var containers []map[string]any
	for _, cs := range p.Status.ContainerStatuses {
		containers = append(containers, map[string]any{"name": cs.Name, "image": cs.Image, "imageID": cs.ImageID, "ready": false,
			"restartCount": cs.RestartCount, "started": false,
			"state": map[string]any{"terminated": map[string]any{"exitCode": 137, "reason": "Error", "finishedAt": now}}})
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase":   corev1.PodFailed,
		"reason":  "Evicted",
		"message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi.",
		"conditions": []map[string]any{
			{"type": corev1.PodReady, "status": corev1.ConditionFalse, "reason": "PodFailed", "lastTransitionTime": now},
			{"type": corev1.ContainersReady, "status": corev1.ConditionFalse, "reason": "PodFailed", "lastTransitionTime": now},
		},
		"containerStatuses": containers,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Status().Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		t.Fatalf("evicting %s: %v", p.Name, err)
	}
	if p.Status.Phase != corev1.PodFailed || p.Status.PodIP == "" {
		t.Fatalf("evicted pod %s: phase %s, podIP %q", p.Name, p.Status.Phase, p.Status.PodIP)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			t.Fatalf("evicted pod %s carries %s=%s: this scenario is the Failed pod without it", p.Name, cond.Type, cond.Status)
		}
	}
}
