package realnode

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/node"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/procs"
)

// testHelmInstall installs olmguard with the README's `helm install olmguard charts/olmguard -n
// olmguard-system --create-namespace` (through Helm's Go SDK, the chart's default values): every
// pod turns Ready on the real node through its real probes, and the webhook in them answers the
// apiserver (#3199 replayed). Then the README's Helm uninstall (kubectl olmguard uninstall, helm
// uninstall, kubectl delete namespace) leaves nothing of olmguard and no finalizer.
func testHelmInstall(t *testing.T, c *cluster.Cluster, n *node.Node, sim *olmsim.Sim, cat *olmsim.Catalog) {
	ctx := context.Background()
	ch, err := charts.Load()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := charts.ActionConfig(c.Kubeconfig, charts.DefaultNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	setFakeNodesSchedulable(t, c, n, false)
	start := time.Now()
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = charts.DefaultReleaseName, charts.DefaultNamespace, true
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, time.Minute
	if _, err := in.RunWithContext(ctx, ch, nil); err != nil {
		t.Fatalf("helm install: %v", err)
	}
	waitAvailable(t, c)
	t.Logf("olmguard's pods Ready %s after helm install", time.Since(start).Round(100*time.Millisecond))
	setFakeNodesSchedulable(t, c, n, true)

	checkReplays3199(t, sim, cat, "realnode-helm-f1", "with olmguard installed by helm")

	plugin := exec.Command(filepath.Join(procs.Binaries(t), "kubectl-olmguard"), "uninstall", "--kubeconfig", c.Kubeconfig)
	if out, err := plugin.CombinedOutput(); err != nil {
		t.Fatalf("kubectl olmguard uninstall: %v\n%s", err, out)
	}
	un := action.NewUninstall(cfg)
	un.WaitStrategy, un.Timeout = kube.HookOnlyStrategy, time.Minute
	if _, err := un.Run(charts.DefaultReleaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	if err := c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: charts.DefaultNamespace}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	checkNothingLeft(t, c)
}
