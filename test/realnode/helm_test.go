package realnode

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
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
	"github.com/olmguard/olmguard/test/testenv"
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
	checkAuditRan(t, c, n)

	checkReplays3199(t, sim, cat, "realnode-helm-f1", "with olmguard installed by helm")

	plugin := exec.Command(filepath.Join(procs.Binaries(t), "kubectl-olmguard"), "uninstall", "--yes", "--kubeconfig", c.Kubeconfig)
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

// checkAuditRan: the controller's leader, in its pod with the chart's RBAC, finishes its first OLM
// audit (olm-audit runs at once on the leader) having read every kind doctor checks: no check
// skipped and no request refused in its log.
func checkAuditRan(t *testing.T, c *cluster.Cluster, n *node.Node) {
	t.Helper()
	var logs string
	testenv.Eventually(t, "the controller's leader logs a finished OLM audit", func(ctx context.Context) (bool, error) {
		l, err := currentLeader(ctx, c)
		if err != nil || l.pod == "" {
			return false, nil
		}
		pod := &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: charts.DefaultNamespace, Name: l.pod}, pod); err != nil {
			return false, nil
		}
		logs, err = n.PodLogs(pod, "controller")
		return err == nil && strings.Contains(logs, "OLM audit done"), nil
	})
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "checks skipped") || procs.PermissionDenied.MatchString(line) {
			t.Errorf("the controller installed by helm: %s", line)
		}
	}
}
