package realnode

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/node"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// testHelmInstall installs olmguard's previous chart (charts/testdata, through Helm's Go SDK, its
// default values) and upgrades it to this chart with `helm upgrade --reset-then-reuse-values` while
// admissions are sent back to back: none goes without olmguard's answer during the rollout, the
// serving certificate's Secret is kept and the webhook configurations keep a CA bundle. On the
// upgraded release: every pod Ready on the real node through its real probes, the webhook in them
// answers the apiserver (#3199 replayed), and `helm test` (its Pod runs kubectl-olmguard probe)
// passes. Then the README's Helm uninstall (helm uninstall alone, whose pre-delete hook runs the
// image's kubectl-olmguard uninstall; kubectl delete namespace) leaves nothing of olmguard, none of
// the hooks' objects, and no finalizer, also on a CSV left carrying it.
func testHelmInstall(t *testing.T, c *cluster.Cluster, n *node.Node, sim *olmsim.Sim, cat *olmsim.Catalog) {
	ctx := context.Background()
	cfg, err := charts.ActionConfig(c.Kubeconfig, charts.DefaultNamespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	setFakeNodesSchedulable(t, c, n, false)
	// The previous chart's templates and flags, with its default image: the one realNode imported,
	// built from this checkout (both charts default to manifests.DefaultImage). The upgrade is then
	// the chart's upgrade (templates, flags, pod template, configurations) run by today's binaries.
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	prev, err := loader.Load(filepath.Join(root, previousChart))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = charts.DefaultReleaseName, charts.DefaultNamespace, true
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, time.Minute
	if _, err := in.RunWithContext(ctx, prev, nil); err != nil {
		t.Fatalf("helm install of the previous chart: %v", err)
	}
	waitAvailable(t, c)
	t.Logf("olmguard's pods Ready %s after helm install of the previous chart", time.Since(start).Round(100*time.Millisecond))
	testHelmUpgradeUnderLoad(t, c, cfg, cat.Namespace)
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

// previousChart is olmguard's chart before the Helm lifecycle changes (charts/testdata/README.md),
// relative to the checkout: the version testHelmInstall upgrades from.
const previousChart = "charts/testdata/olmguard-0.1.0-82e91b6.tgz"

// testHelmUpgradeUnderLoad upgrades the release installed from the previous chart to this chart
// (charts.Load) with `helm upgrade --reset-then-reuse-values` (action.Upgrade
// ResetThenReuseValues, as docs/helm.md recommends) while InstallPlans and unpack Jobs (in jobsNS,
// which holds a CatalogSource) are created back to back. The load starts before the upgrade and
// ends only once the rollout is complete (every webhook and controller pod of its Deployment's
// newest ReplicaSet and Ready, none of the pods from before left): no admission may go without
// olmguard's answer. The serving certificate's Secret keeps its data, every webhook keeps its CA
// bundle, and the webhooks this chart adds get one.
func testHelmUpgradeUnderLoad(t *testing.T, c *cluster.Cluster, cfg *action.Configuration, jobsNS string) {
	t.Helper()
	ctx := context.Background()
	ns := charts.DefaultNamespace
	secret := &corev1.Secret{}
	testenv.Eventually(t, "the self-signed webhook's Secret "+olmguard.WebhookTLSSecretName, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: olmguard.WebhookTLSSecretName}, secret)
		return err == nil && len(secret.Data[corev1.TLSCertKey]) > 0, client.IgnoreNotFound(err)
	})
	bundlesBefore := caBundles(t, c)
	for name, b := range bundlesBefore {
		if len(b) == 0 {
			t.Fatalf("webhook %s has no CA bundle before the upgrade", name)
		}
	}
	old := map[string]bool{}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "olmguard"}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		old[p.Name] = true
	}

	l := startLoad(newAdmissions(t, c, "realnode-helm-upgrade", jobsNS, true), 6)
	defer l.Stop() // when the test stops early: Stop again is harmless
	// The upgrade starts once the load is under way, and the load ends only once the rollout is
	// complete: the whole rollout happens under traffic, however fast the machine is.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testenv.Patience, true, func(context.Context) (bool, error) {
		return l.Sent() >= 100, nil
	}); err != nil {
		t.Fatalf("the load did not start: %v", err)
	}
	ch, err := charts.Load()
	if err != nil {
		t.Fatal(err)
	}
	sentBefore, start := l.Sent(), time.Now()
	up := action.NewUpgrade(cfg)
	up.Namespace, up.ResetThenReuseValues = ns, true
	up.WaitStrategy, up.Timeout = kube.HookOnlyStrategy, time.Minute
	if _, err := up.RunWithContext(ctx, charts.DefaultReleaseName, ch, nil); err != nil {
		t.Fatalf("helm upgrade --reset-then-reuse-values: %v", err)
	}
	testenv.Eventually(t, "the upgrade's rollout complete: every webhook and controller pod of the new pod template and Ready, none of the old left", func(ctx context.Context) (bool, error) {
		return rolledOut(ctx, c, old)
	})
	rollout := time.Since(start)
	l.Stop()
	t.Logf("helm upgrade from the previous chart: rollout complete %s after the upgrade began, %d admissions sent meanwhile", rollout.Round(100*time.Millisecond), l.Sent()-sentBefore)
	l.Check(t, fmt.Sprintf("helm upgrade from the previous chart begun at %s after %d admissions", start.Format("15:04:05.000"), sentBefore))
	if t.Failed() {
		logWebhookCalls(t, c)
	}

	got := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil {
		t.Fatalf("the serving certificate's Secret after the upgrade: %v", err)
	}
	if !maps.EqualFunc(secret.Data, got.Data, bytes.Equal) {
		t.Errorf("the serving certificate's Secret %s changed in the upgrade (keys before %v, after %v)", secret.Name, slices.Sorted(maps.Keys(secret.Data)), slices.Sorted(maps.Keys(got.Data)))
	}
	// A webhook this chart adds gets its CA bundle from the new pods at their start.
	var after map[string][]byte
	testenv.Eventually(t, "every webhook of both configurations carries a CA bundle after the upgrade", func(context.Context) (bool, error) {
		after = caBundles(t, c)
		for _, b := range after {
			if len(b) == 0 {
				return false, nil
			}
		}
		return len(after) > 0, nil
	})
	for name, b := range bundlesBefore {
		if a, ok := after[name]; ok && !bytes.Equal(a, b) {
			t.Errorf("webhook %s: its CA bundle changed in the upgrade", name)
		}
	}
}

// caBundles maps each webhook of olmguard's two configurations (mutating/<name>,
// validating/<name>) to its CA bundle.
func caBundles(t *testing.T, c *cluster.Cluster) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	out := map[string][]byte{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, m); err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		out["mutating/"+w.Name] = w.ClientConfig.CABundle
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.ValidatingWebhookConfigurationName}, v); err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Webhooks {
		out["validating/"+w.Name] = w.ClientConfig.CABundle
	}
	return out
}

// rolledOut reports whether both of olmguard's Deployments are rolled out: each has its replicas,
// all of its newest ReplicaSet (the pod-template-hash of the ReplicaSet of the Deployment's
// revision) and Ready, and no pod of olmguard's named in old is left, terminating ones included.
func rolledOut(ctx context.Context, c *cluster.Cluster, old map[string]bool) (bool, error) {
	ns := charts.DefaultNamespace
	for _, component := range []string{"webhook", "controller"} {
		d := &appsv1.Deployment{}
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "olmguard-" + component}, d); err != nil {
			return false, err
		}
		if d.Status.ObservedGeneration < d.Generation {
			return false, nil
		}
		sel := client.MatchingLabels{"app.kubernetes.io/name": "olmguard", "app.kubernetes.io/component": component}
		sets := &appsv1.ReplicaSetList{}
		if err := c.Client.List(ctx, sets, client.InNamespace(ns), sel); err != nil {
			return false, err
		}
		hash := ""
		for _, rs := range sets.Items {
			if metav1.IsControlledBy(&rs, d) && rs.Annotations["deployment.kubernetes.io/revision"] == d.Annotations["deployment.kubernetes.io/revision"] {
				hash = rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey]
			}
		}
		if hash == "" {
			return false, nil
		}
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns), sel); err != nil {
			return false, err
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if int32(len(pods.Items)) != want {
			return false, nil
		}
		for _, p := range pods.Items {
			if old[p.Name] || p.DeletionTimestamp != nil || p.Labels[appsv1.DefaultDeploymentUniqueLabelKey] != hash || !cluster.PodReady(&p) {
				return false, nil
			}
		}
	}
	return true, nil
}
