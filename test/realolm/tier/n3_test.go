package tier

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
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
// The eviction is written as the kubelet writes it, to the pod's status (realolm.EvictPod, which
// says why kwok leaves it as written); the test checks that it stays so for the whole stock window.
func TestN3FailedCatalogPodRecovered(t *testing.T) {
	declare(t, "N3: Failed catalog pods OLM keeps (#3459, #3519)", false)
	c, o := realOLM(t)
	c.SkipUnlessKwok(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*testenv.Patience)
	defer cancel()
	cs := realolm.NewRegistryCatalog(o.CatalogNamespace, "n3-registry")
	if err := c.Client.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), cs) })
	dead := must(realolm.SettleAndEvict(ctx, c.Client, cs))(t)
	node := &corev1.Node{}
	if err := c.Client.Get(ctx, types.NamespacedName{Name: dead.Spec.NodeName}, node); err != nil || !cluster.NodeReady(node) {
		t.Fatalf("node %s of the evicted pod is not Ready (err=%v): this scenario is about a Ready node", dead.Spec.NodeName, err)
	}

	// Stock OLM: the Failed pod stays the catalog's only pod for the whole window.
	if err := realolm.FailedPodKept(ctx, c.Client, cs, dead, n3StockWindow); err != nil {
		t.Fatalf("stock OLM %s: %v: #3459/#3519 no longer reproduce", o.Version, err)
	}
	t.Logf("stock OLM %s: %s after its registry pod %s turned Failed (Evicted) on Ready node %s, it keeps it and runs no other",
		o.Version, n3StockWindow, dead.Name, dead.Spec.NodeName)
	_, report := doctorReport(t, c, cs.Namespace)
	f := finding(t, report, "CatalogPodFailed", dead.Name)
	t.Logf("doctor: %s %s: %s (%s)", f.Class, f.Check, f.Problem, f.Evidence)

	// With olmguard: the Failed pod is deleted, and OLM runs a new one.
	procs.RunController(t, c.Kubeconfig)
	after := must(realolm.FailedPodReplaced(ctx, c.Client, cs, dead))(t)
	// OLM, not olmguard, made the replacement: it is owned by the CatalogSource as OLM owns its pods.
	if ref := metav1.GetControllerOf(after); ref == nil || ref.Kind != olm.CatalogSourceKind || ref.Name != cs.Name {
		t.Errorf("replacement pod %s is not controlled by CatalogSource %s: %v", after.Name, cs.Name, after.OwnerReferences)
	}
	t.Logf("with olmguard: OLM %s runs registry pod %s on %s in place of the Failed %s", o.Version, after.Name, after.Spec.NodeName, dead.Name)
	checkLogs(t, o)
}
