package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestNodeRunsAPod: a pod bound to the real node runs and turns Ready through its probe; after
// Stop the host keeps nothing of the node.
func TestNodeRunsAPod(t *testing.T) {
	ctx, c, opts := clusterForANode(t, "olmguard-node-test")
	n, err := Start(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	runPause(t, ctx, c, n, "pause")
	StopLeavingNothing(t, n)
}

// TestNodeAfterAKilledRun: a node whose test binary was killed (its kubelet and containerd die
// with it, its shims and the pod's containers run on, its mounts, namespaces and rules stay) is
// reclaimed by the next start of a node of that name, which then runs a pod, and whose Stop
// leaves nothing. Failed before: "/tmp/olmguard-node-olmguard-node exists" (CI, stop 43).
func TestNodeAfterAKilledRun(t *testing.T) {
	ctx, c, opts := clusterForANode(t, "olmguard-node-killed")
	killed, err := Start(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	runPause(t, ctx, c, killed, "before")
	for _, p := range []*exec.Cmd{killed.kubelet, killed.containerd} {
		_ = p.Process.Kill()
	}
	testenv.Eventually(t, "the killed kubelet and containerd gone", func(context.Context) (bool, error) {
		return len(nodeProcesses(killed.dir)) == 0, nil
	})
	if len(procs.CommandLinesWith(killed.containerdSocket())) == 0 {
		t.Fatal("no runc shim outlived containerd: the test does not build the leftover it means to")
	}

	n, err := Start(ctx, c, opts)
	if err != nil {
		t.Fatalf("starting a node over the killed one's leftovers: %v", err)
	}
	runPause(t, ctx, c, n, "after")
	StopLeavingNothing(t, n)
}

// clusterForANode starts a one-node kwok cluster for a real node and returns it with the node's
// options (the pinned kubelet, the pause image built); both go when t ends.
func clusterForANode(t *testing.T, name string) (context.Context, *cluster.Cluster, Options) {
	t.Helper()
	kubelet, _ := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	pause, err := BuildPause(ctx, root, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cluster.Start(ctx, cluster.Options{Name: name, Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return ctx, c, Options{Kubelet: kubelet, Images: []string{pause}}
}

// runPause runs a pause pod named name on n and waits until it is Ready.
func runPause(t *testing.T, ctx context.Context, c *cluster.Cluster, n *Node, name string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: n.Name, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "pause", Image: SandboxImage, ImagePullPolicy: corev1.PullNever}}}}
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pod "+name+" Running and Ready on the real node", func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return false, err
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func TestRulesIgnoresEmptyTables(t *testing.T) {
	empty := "# Generated\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [3:120]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"
	if rules(empty) != rules("") {
		t.Errorf("an empty table counts as a rule: %q", rules(empty))
	}
	for _, dump := range []string{
		"*filter\n:INPUT DROP [0:0]\nCOMMIT\n",
		"*nat\n:KUBE-MARK [0:0]\nCOMMIT\n",
		"*nat\n:POSTROUTING ACCEPT [0:0]\n-A POSTROUTING -j MASQUERADE\nCOMMIT\n",
	} {
		if rules(dump) == rules("") {
			t.Errorf("%q reads as no rules", dump)
		}
	}
}

// TestPodLogs reads a container's log files the way the kubelet lays them out, every restart in
// order (10.log after 9.log), and says where it looked when there is none.
func TestPodLogs(t *testing.T) {
	n := &Node{dir: t.TempDir()}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}
	if _, err := n.PodLogs(pod, "c"); err == nil || !strings.Contains(err.Error(), "ns_p_u1/c") {
		t.Fatalf("no log yet: %v", err)
	}
	dir := filepath.Join(n.dir, "pod-logs", "ns_p_u1", "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, restart := range []int{10, 0, 9} {
		line := fmt.Sprintf("2026-11-26T01:00:00Z stderr F run %d\n", restart)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d.log", restart)), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := n.PodLogs(pod, "c")
	if err != nil {
		t.Fatal(err)
	}
	if want := "2026-11-26T01:00:00Z stderr F run 0\n2026-11-26T01:00:00Z stderr F run 9\n2026-11-26T01:00:00Z stderr F run 10\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
