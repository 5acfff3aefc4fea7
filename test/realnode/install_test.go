// Package realnode is the real-node tier: olmguard installed as users install it, from its image,
// as pods on a real kubelet with containerd (test/node) beside the local cluster.
package realnode

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/image"
	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/node"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// Image is the reference olmguard's image is built and imported as: the one the manifests name,
// so that the README's own command installs it (the default pull policy, IfNotPresent for a
// tagged image, finds it on the node).
const Image = manifests.DefaultImage

// realNode starts a cluster (name, made unique to the process) whose only schedulable node is a real one, with olmguard's image and
// the sandbox image imported. It returns the cluster, the node and the kubectl binary.
func realNode(t *testing.T, name string) (*cluster.Cluster, *node.Node, string) {
	t.Helper()
	kubelet, kubectl := node.Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pause, err := node.BuildPause(ctx, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "olmguard.tar")
	if err := image.Build(ctx, image.Olmguard, image.Options{Root: root, Name: Image, Out: img}); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-%s-%d", name, os.Getpid()), Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	n, err := node.Start(ctx, c, node.Options{Kubelet: kubelet, Images: []string{pause, img}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { node.StopLeavingNothing(t, n) })
	t.Cleanup(func() {
		if t.Failed() {
			describePods(t, c)
		}
	})
	return c, n, kubectl
}

// setFakeNodesSchedulable cordons (false) or uncordons (true) kwok's fake nodes: while olmguard
// is installed only the real node takes pods (a fake node would report them Running without
// running them); afterwards the simulated operators' pods go to the fake nodes.
func setFakeNodesSchedulable(t *testing.T, c *cluster.Cluster, n *node.Node, schedulable bool) {
	t.Helper()
	setSchedulable(t, c, func(name string) bool { return name != n.Name }, schedulable)
}

// setSchedulable cordons (false) or uncordons (true) the nodes whose name matches.
func setSchedulable(t *testing.T, c *cluster.Cluster, match func(name string) bool, schedulable bool) {
	t.Helper()
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, !schedulable)))
	for i := range nodes.Items {
		if match(nodes.Items[i].Name) {
			if err := c.Client.Patch(ctx, &nodes.Items[i], patch); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// kubectlApply runs the README's install command, a plain kubectl apply --server-side -k (no
// forced ownership), of dir relative to the checkout.
func kubectlApply(t *testing.T, c *cluster.Cluster, kubectl, dir string) {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectl, "--kubeconfig", c.Kubeconfig, "apply", "--server-side", "-k", dir)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply --server-side -k %s: %v\n%s", dir, err, out)
	}
}

// changedSetting writes an overlay of the self-signed install with one setting changed (the
// controller's drift window), as a user's own kustomization does, and returns its directory.
func changedSetting(t *testing.T) string {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(root, "manifests", "overlays", "self-signed")) // kustomize takes relative paths only
	if err != nil {
		t.Fatal(err)
	}
	k := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
patches:
  - target: {kind: Deployment, name: olmguard-controller}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args/-
        value: --drift-window=45s
`, base)
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// waitAvailable waits until both of olmguard's Deployments have every replica of their newest
// revision Ready.
func waitAvailable(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	testenv.Eventually(t, "olmguard's Deployments available", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
			d := &appsv1.Deployment{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: olmguard.DefaultNamespace, Name: name}, d); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			want := int32(1)
			if d.Spec.Replicas != nil {
				want = *d.Spec.Replicas
			}
			if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas != want || d.Status.ReadyReplicas != want || d.Status.Replicas != want {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestInstallSelfSigned installs olmguard as the README says and checks every pod turns Ready
// through its real probes and the apiserver calls the webhook through its Service (F1 through
// the webhook in its pods).
func TestInstallSelfSigned(t *testing.T) {
	c, n, kubectl := realNode(t, "realnode")
	setFakeNodesSchedulable(t, c, n, false)
	start := time.Now()
	kubectlApply(t, c, kubectl, "manifests/overlays/self-signed")
	waitAvailable(t, c)
	t.Logf("olmguard's pods Ready %s after kubectl apply", time.Since(start).Round(100*time.Millisecond))

	// Upgrade and re-sync as users do them: the same install again, then one with a changed
	// setting, each a plain server-side apply; no ClusterRole may lose its rules meanwhile.
	watch, err := c.WatchEmptiedRoles(context.Background(), map[string]string{"app.kubernetes.io/name": "olmguard"})
	if err != nil {
		t.Fatal(err)
	}
	kubectlApply(t, c, kubectl, "manifests/overlays/self-signed")
	kubectlApply(t, c, kubectl, changedSetting(t))
	emptied, err := watch.Stop(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(emptied) > 0 {
		t.Errorf("re-applying the install left ClusterRoles without rules for a moment: %v", emptied)
	}
	waitAvailable(t, c)
	setFakeNodesSchedulable(t, c, n, true)

	ctx := context.Background()
	// The apiserver reaches the webhook through its Service: no URL in the configurations.
	mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, mwc); err != nil {
		t.Fatal(err)
	}
	for _, w := range mwc.Webhooks {
		if w.ClientConfig.Service == nil || w.ClientConfig.URL != nil {
			t.Fatalf("webhook %s is not reached through a Service: %+v", w.Name, w.ClientConfig)
		}
	}
	// Each plan as its create returned it: the webhook, called through the Service, added the
	// ownerReference OLM's race left out (the controller's repair would come only later).
	sim, err := olmsim.Start(ctx, c.Config, c.Client.Scheme(), olmsim.Options{Namespace: "olm"})
	if err != nil {
		t.Fatal(err)
	}
	cat := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	checkReplays3199(t, sim, cat, "realnode-f1", "with olmguard's webhook in its pods")

	t.Run("metrics served with their authorization", func(t *testing.T) {
		checkMetricsAccess(t, c)
	})

	t.Run("F3 uninstall", func(t *testing.T) {
		ns := "realnode-f3"
		gamma := scenario.GammaUpgradeCatalog(ns)
		sub, err := scenario.InstallGamma(ctx, sim, gamma, ns)
		if err != nil {
			t.Fatal(err)
		}
		if err := scenario.Uninstall(ctx, c.Client, sub); err != nil {
			t.Fatal(err)
		}
		if err := sim.SyncCSVs(ctx, ns); err != nil { // OLM's own finalizer runs
			t.Fatal(err)
		}
		csv := gamma.Bundles[len(gamma.Bundles)-1].CSVName
		testenv.Eventually(t, "CSV "+csv+" deleted, its cleanup done by the controller's pod", func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: csv}, &v1alpha1.ClusterServiceVersion{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		left, err := scenario.CountLeftovers(ctx, c.Client, gamma, ns)
		if err != nil {
			t.Fatal(err)
		}
		if left.Total() != 0 {
			t.Errorf("with olmguard in pods the uninstall left %+v", left)
		}
	})

	t.Run("F4 second install after an OLM upgrade", func(t *testing.T) {
		if err := scenario.Replay3210(ctx, sim.WithVersion(olmsim.V0_28), "realnode-f4-a", "realnode-f4-b"); err != nil {
			t.Errorf("with olmguard in pods: %v", err)
		}
	})

	// With the fake nodes cordoned again: a replacement pod must land on the real node (on a
	// fake one it would look Ready without serving).
	t.Run("in its pods under disruption", func(t *testing.T) {
		setFakeNodesSchedulable(t, c, n, false)
		defer setFakeNodesSchedulable(t, c, n, true)
		t.Run("memory and admission latency", func(t *testing.T) { testMeasureInPods(t, c, cat.Namespace) })
		t.Run("webhook pod deleted under load", func(t *testing.T) { testWebhookPodDeletedUnderLoad(t, c, cat.Namespace) })
		t.Run("controller leader's node lost", func(t *testing.T) { testLeaderNodeLost(t, c, n) })
		t.Run("certificates rotated while the pods serve", func(t *testing.T) { testCertRotationInPods(t, c, cat.Namespace) })
	})

	t.Run("uninstall as the README says", func(t *testing.T) {
		checkUninstall(t, c, kubectl, "manifests/overlays/self-signed")
		// OLM keeps working: an operator installs and upgrades with olmguard gone.
		ns := "realnode-after-uninstall"
		if _, err := scenario.InstallGamma(ctx, sim, scenario.GammaUpgradeCatalog(ns), ns); err != nil {
			t.Errorf("installing an operator after olmguard was uninstalled: %v", err)
		}
	})

	t.Run("cert-manager overlay", func(t *testing.T) { testCertManagerOverlay(t, c, n, kubectl, sim, cat) })
	t.Run("helm install", func(t *testing.T) { testHelmInstall(t, c, n, sim, cat) })
}

// checkReplays3199 replays #3199 three times in namespaces prefix-<i>: each plan, as its create
// returned it, must carry Subscription B's owner, added by the webhook the apiserver called.
func checkReplays3199(t *testing.T, sim *olmsim.Sim, cat *olmsim.Catalog, prefix, with string) {
	t.Helper()
	for i := range 3 {
		r, err := scenario.Replay3199(context.Background(), sim, cat, fmt.Sprintf("%s-%d", prefix, i))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Owned() {
			t.Errorf("replay %d of #3199: the plan misses Subscription B's owner %s", i, with)
		}
	}
}

// checkUninstall removes olmguard as the README says (kubectl olmguard uninstall, then kubectl
// delete --ignore-not-found -k of the overlay it was installed from): nothing of olmguard is left
// and no CSV keeps its finalizer.
func checkUninstall(t *testing.T, c *cluster.Cluster, kubectl, overlay string) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := procs.Binaries(t)
	for _, args := range [][]string{
		{filepath.Join(bin, "kubectl-olmguard"), "uninstall", "--yes", "--kubeconfig", c.Kubeconfig},
		{kubectl, "--kubeconfig", c.Kubeconfig, "delete", "--ignore-not-found", "-k", overlay},
	} {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	checkNothingLeft(t, c)
}

// checkNothingLeft waits until nothing of olmguard is left (its namespace, its cluster-scoped
// objects) and checks no CSV keeps its finalizer.
func checkNothingLeft(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	testenv.Eventually(t, "nothing of olmguard left", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.DefaultNamespace}, &corev1.Namespace{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		for _, list := range []client.ObjectList{&rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{},
			&admissionregistrationv1.MutatingWebhookConfigurationList{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{}} {
			if err := c.Client.List(ctx, list, client.MatchingLabels{"app.kubernetes.io/name": "olmguard"}); err != nil {
				return false, err
			}
			if meta.LenList(list) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if err := c.Client.List(ctx, csvs); err != nil {
		t.Fatal(err)
	}
	for _, csv := range csvs.Items {
		if slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
			t.Errorf("CSV %s/%s keeps %s after olmguard was uninstalled", csv.Namespace, csv.Name, olmguard.CleanupFinalizer)
		}
	}
}

// describePods logs the state of every pod in olmguard's namespace and the namespace's events.
func describePods(t *testing.T, c *cluster.Cluster) {
	ctx := context.Background()
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(olmguard.DefaultNamespace)); err != nil {
		t.Log(err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s on %q: phase %s, conditions %+v, containers %+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.Conditions, p.Status.ContainerStatuses)
	}
	events := &corev1.EventList{}
	if err := c.Client.List(ctx, events, client.InNamespace(olmguard.DefaultNamespace)); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s/%s: %s %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// checkMetricsAccess scrapes each olmguard pod's /metrics (HTTPS on port 8080) as Prometheus
// would: with the token of a ServiceAccount bound to olmguard-metrics-reader it gets olmguard's
// metrics; with one not bound, 403; with none, 401.
func checkMetricsAccess(t *testing.T, c *cluster.Cluster) {
	ctx := context.Background()
	reader := serviceAccountToken(t, c, "metrics-scraper", "olmguard-metrics-reader")
	stranger := serviceAccountToken(t, c, "metrics-stranger", "")
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.InNamespace(olmguard.DefaultNamespace)); err != nil {
		t.Fatal(err)
	}
	// The pods serve a self-signed certificate (controller-runtime's secure serving).
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, p := range pods.Items {
		if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		url := "https://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/metrics"
		for _, tt := range []struct {
			who, token string
			status     int
		}{{"the metrics reader", reader, http.StatusOK}, {"a ServiceAccount without the role", stranger, http.StatusForbidden}, {"no token", "", http.StatusUnauthorized}} {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatalf("%s from pod %s: %v", url, p.Name, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.status {
				t.Errorf("pod %s /metrics for %s: %d, want %d", p.Name, tt.who, resp.StatusCode, tt.status)
			}
			if tt.status == http.StatusOK && !strings.Contains(string(body), "olmguard_") {
				t.Errorf("pod %s /metrics for %s holds no olmguard metric", p.Name, tt.who)
			}
		}
	}
}

// serviceAccountToken creates ServiceAccount name in default, bound to ClusterRole role when not
// empty, and returns a token for it.
func serviceAccountToken(t *testing.T, c *cluster.Cluster, name, role string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if err := c.Client.Create(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if role != "" {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"}}}
		if err := c.Client.Create(ctx, crb); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}
