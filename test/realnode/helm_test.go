package realnode

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/node"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// testHelmInstall installs olmguard with the README's `helm install olmguard charts/olmguard -n
// olmguard-system --create-namespace` (through Helm's Go SDK, the chart's default values): every
// pod turns Ready on the real node through its real probes, and the webhook in them answers the
// apiserver (#3199 replayed), and `helm test` (its Pod runs kubectl-olmguard probe) passes. Then
// the README's Helm uninstall (helm uninstall alone, whose pre-delete hook runs the image's
// kubectl-olmguard uninstall; kubectl delete namespace) leaves nothing of olmguard, none of the
// hooks' objects, and no finalizer, also on a CSV left carrying it.
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

	// The hook pods (helm test, the pre-delete Job) must run on the real node.
	setFakeNodesSchedulable(t, c, n, false)
	defer setFakeNodesSchedulable(t, c, n, true)

	// helm test: the chart's test Pod proves the apiserver calls the webhook (kubectl-olmguard probe).
	rt := action.NewReleaseTesting(cfg)
	rt.Namespace, rt.Timeout = charts.DefaultNamespace, 2*time.Minute
	tested, shutdown, err := rt.Run(charts.DefaultReleaseName)
	if err != nil {
		if rel, ok := tested.(*release.Release); ok {
			var logs strings.Builder
			_ = rt.GetPodLogs(&logs, rel)
			t.Logf("helm test's pod logs:\n%s", logs.String())
		}
		t.Fatalf("helm test: %v", err)
	}
	if err := shutdown(); err != nil {
		t.Errorf("helm test: deleting its hooks: %v", err)
	}
	if rel, ok := tested.(*release.Release); !ok {
		t.Errorf("helm test returned a %T", tested)
	} else {
		ran := 0
		for _, h := range rel.Hooks {
			if slices.Contains(h.Events, release.HookTest) {
				ran++
				if h.LastRun.Phase != release.HookPhaseSucceeded {
					t.Errorf("helm test hook %s %s: %s", h.Kind, h.Name, h.LastRun.Phase)
				}
			}
		}
		if ran == 0 {
			t.Error("helm test ran no test hook")
		}
	}

	// A CSV olmguard's webhook gives its finalizer, left for helm uninstall alone to free.
	held := heldCSV(t, c)

	// The README's Helm uninstall: helm uninstall alone; its pre-delete hook runs the image's
	// kubectl-olmguard uninstall --yes.
	un := action.NewUninstall(cfg)
	un.WaitStrategy, un.Timeout = kube.HookOnlyStrategy, 3*time.Minute
	if _, err := un.Run(charts.DefaultReleaseName); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	got := &v1alpha1.ClusterServiceVersion{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(held), got); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	} else if slices.Contains(got.Finalizers, olmguard.CleanupFinalizer) {
		t.Errorf("CSV %s/%s keeps %s after helm uninstall alone", held.Namespace, held.Name, olmguard.CleanupFinalizer)
	}
	checkHookObjectsGone(t, c)
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

// heldCSV creates a CSV in a fresh namespace and waits until olmguard gives it its finalizer
// olmguard.io/cleanup.
func heldCSV(t *testing.T, c *cluster.Cluster) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	ns := testenv.FreshNamespace(t, c.Client, "realnode-helm-held", testenv.DeleteAtEnd())
	csv := &v1alpha1.ClusterServiceVersion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "held.v1.0.0"},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: "held", Version: "1.0.0",
			InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment", StrategySpec: runtime.RawExtension{Raw: []byte(`{"deployments":[]}`)}}},
	}
	if err := c.Client.Create(context.Background(), csv); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the CSV carries "+olmguard.CleanupFinalizer, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.ClusterServiceVersion{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(csv), got); err != nil {
			return false, err
		}
		return slices.Contains(got.Finalizers, olmguard.CleanupFinalizer), nil
	})
	return csv
}

// checkHookObjectsGone: the pre-delete hook's and the test hook's objects (hook-delete-policy) are
// deleted, with the release namespace still there.
func checkHookObjectsGone(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ns := charts.DefaultNamespace
	for _, o := range []client.Object{
		&batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-uninstall"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-uninstall"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-uninstall"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-uninstall"}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-uninstall"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-uninstall"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-test-webhook-probe"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-test"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-test"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-test"}},
	} {
		testenv.Eventually(t, fmt.Sprintf("%T %s deleted", o, o.GetName()), func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKeyFromObject(o), o)
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			// A Job's pods go with it (background deletion): terminating is gone enough.
			return err == nil && o.GetDeletionTimestamp() != nil, client.IgnoreNotFound(err)
		})
	}
}
