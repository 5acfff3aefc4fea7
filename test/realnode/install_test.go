// Package realnode is the real-node tier: olmguard installed as users install it, from its image,
// as pods on a real kubelet with containerd (test/node) beside the local cluster.
package realnode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/image"
	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/node"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// Image is the reference olmguard's image is built and imported as: the one the manifests name,
// so that the README's own command installs it (the default pull policy, IfNotPresent for a
// tagged image, finds it on the node).
const Image = manifests.DefaultImage

// realNode starts a cluster whose only schedulable node is a real one, with olmguard's image and
// the sandbox image imported. It returns the cluster, the node and the kubectl binary.
func realNode(t *testing.T) (*cluster.Cluster, *node.Node, string) {
	t.Helper()
	if err := node.Supported(); err != nil {
		if errors.Is(err, node.ErrUnsupported) && os.Getenv("OLMGUARD_REQUIRE_REAL_NODE") == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "test-binaries.sh"), "kubelet").Output()
	if err != nil {
		t.Fatalf("building the kubelet: %v", err)
	}
	kubelet := strings.TrimSpace(string(out))
	kubectl := filepath.Join(filepath.Dir(kubelet), "kubectl")
	dir := t.TempDir()
	pause, err := node.BuildPause(ctx, root, dir)
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "olmguard.tar")
	if err := image.Build(ctx, image.Olmguard, image.Options{Root: root, Name: Image, Out: img}); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-realnode-%d", os.Getpid()), Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	n, err := node.Start(ctx, c, node.Options{Kubelet: kubelet, Images: []string{pause, img}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
		if left := n.Leftovers(); len(left) > 0 {
			t.Errorf("the real node left on the host: %v", left)
		}
	})
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
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, !schedulable)))
	for i := range nodes.Items {
		if nodes.Items[i].Name != n.Name {
			if err := c.Client.Patch(ctx, &nodes.Items[i], patch); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// kubectlApply runs the README's install command: kubectl apply --server-side -k of an overlay.
func kubectlApply(t *testing.T, c *cluster.Cluster, kubectl, overlay string) {
	t.Helper()
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(kubectl, "--kubeconfig", c.Kubeconfig, "apply", "--server-side", "-k", filepath.Join("manifests", "overlays", overlay))
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply --server-side -k manifests/overlays/%s: %v\n%s", overlay, err, out)
	}
}

// TestInstallSelfSigned installs olmguard as the README says and checks every pod turns Ready
// through its real probes and the apiserver calls the webhook through its Service (F1 through
// the webhook in its pods).
func TestInstallSelfSigned(t *testing.T) {
	c, n, kubectl := realNode(t)
	setFakeNodesSchedulable(t, c, n, false)
	start := time.Now()
	kubectlApply(t, c, kubectl, "self-signed")
	testenv.Eventually(t, "olmguard's Deployments available", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
			d := &appsv1.Deployment{}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: olmguard.DefaultNamespace, Name: name}, d); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if d.Status.ReadyReplicas < 1 || d.Status.ReadyReplicas != d.Status.Replicas {
				return false, nil
			}
		}
		return true, nil
	})
	t.Logf("olmguard's pods Ready %s after kubectl apply", time.Since(start).Round(100*time.Millisecond))
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
	for i := range 3 {
		r, err := scenario.Replay3199(ctx, sim, cat, fmt.Sprintf("realnode-f1-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if !r.Owned() {
			t.Errorf("replay %d of #3199: the plan misses Subscription B's owner with olmguard's webhook in its pods", i)
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
