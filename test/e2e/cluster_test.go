package e2e

// Tests of the test cluster itself: what olmguard's end-to-end tests rely on kwok and
// kube-controller-manager for (scheduling, node failure, garbage collection, Jobs).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

func pausePod(namespace, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
}

func TestClusterPodRunsOnKwokNode(t *testing.T) {
	c := cluster.Shared(t)
	ctx := t.Context()
	ns := c.FreshNamespace(ctx, t, "e2e-pod")

	pod := pausePod(ns, "pause")
	if err := c.Client.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "pod scheduled and Running", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		return pod.Status.Phase == corev1.PodRunning, nil
	})
	if !slices.Contains(c.Nodes(), pod.Spec.NodeName) {
		t.Errorf("pod runs on %q, not on one of the kwok nodes %v", pod.Spec.NodeName, c.Nodes())
	}
	ready := false
	for _, cond := range pod.Status.Conditions {
		ready = ready || cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue
	}
	if !ready || pod.Status.PodIP == "" {
		t.Errorf("running pod is not Ready with an IP: %+v", pod.Status)
	}
}

func TestClusterNodeFailureAndRecovery(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t)
	ctx := t.Context()

	// A node of its own, tainted so that no other test's pods land on it while it is down.
	name := fmt.Sprintf("e2e-failing-%06d", rand.IntN(1000000))
	if err := c.AddNode(ctx, name, map[string]string{"olmguard.io/e2e": "node-failure"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Client.Delete(context.Background(), node); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", name, err)
		}
	})
	taint := []byte(`{"spec":{"taints":[{"key":"olmguard.io/e2e","value":"node-failure","effect":"NoSchedule"}]}}`)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, taint)); err != nil {
		t.Fatal(err)
	}

	// A Deployment's pod on it: kwok readies a pod once, so a pod the node lifecycle controller
	// marked NotReady while its node was down stays NotReady; RecoverNode replaces it.
	labels := map[string]string{"app": "on-" + name}
	replicas := int32(1)
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "on-" + name}, Spec: appsv1.DeploymentSpec{
		Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"olmguard.io/e2e": "node-failure"},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:   []corev1.Container{{Name: "app", Image: "registry.example/app:v1"}}}}}}
	if err := c.Client.Create(ctx, deploy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), deploy) })
	available := func(want int32) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKeyFromObject(deploy), deploy)
			return err == nil && deploy.Status.AvailableReplicas == want, err
		}
	}
	testenv.Eventually(t, "the Deployment on "+name+" available", available(1))

	failed := time.Now()
	if err := c.FailNode(ctx, name); err != nil {
		t.Fatal(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, testenv.Patience)
	defer cancel()
	if err := c.WaitNodeReady(waitCtx, name, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("node NotReady %s after FailNode", time.Since(failed).Round(100*time.Millisecond))
	testenv.Eventually(t, "Ready=Unknown and taint node.kubernetes.io/unreachable", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return false, err
		}
		unknown, unreachable := false, false
		for _, cond := range node.Status.Conditions {
			unknown = unknown || cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionUnknown
		}
		for _, taint := range node.Spec.Taints {
			unreachable = unreachable || taint.Key == corev1.TaintNodeUnreachable
		}
		return unknown && unreachable, nil
	})

	testenv.Eventually(t, "the Deployment on "+name+" unavailable", available(0))

	restored := time.Now()
	waitCtx, cancel = context.WithTimeout(ctx, testenv.Patience)
	defer cancel()
	if err := c.RecoverNode(waitCtx, name); err != nil {
		t.Fatal(err)
	}
	t.Logf("node Ready again, without the unreachable taint, %s after RecoverNode", time.Since(restored).Round(100*time.Millisecond))
	// Fails without RecoverNode's replacement of the pods left NotReady: the Deployment would stay
	// unavailable, and a real OLM would reinstall the CSV that owns it in a hot loop.
	testenv.Eventually(t, "the Deployment on "+name+" available again", available(1))

	// The other nodes kept their heartbeats all along.
	for _, n := range c.Nodes() {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: n}, node); err != nil {
			t.Fatal(err)
		}
		if !cluster.NodeReady(node) {
			t.Errorf("node %s is not Ready: %+v", n, node.Status.Conditions)
		}
	}
}

func TestClusterGarbageCollector(t *testing.T) {
	c := cluster.Shared(t)
	ctx := t.Context()
	ns := c.FreshNamespace(ctx, t, "e2e-gc")

	configMap := func(name string, owners ...*corev1.ConfigMap) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for _, o := range owners {
			cm.OwnerReferences = append(cm.OwnerReferences, metav1.OwnerReference{
				APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID,
			})
		}
		if err := c.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		return cm
	}
	doomed := configMap("owner-deleted")
	alive := configMap("owner-alive")
	orphan := configMap("only-owner-deleted", doomed)
	kept := configMap("one-owner-alive", doomed, alive)

	if err := c.Client.Delete(ctx, doomed, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "dependent of the deleted owner garbage collected", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(orphan), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
	// The garbage collector keeps a dependent with a live owner and drops the dangling reference.
	testenv.Eventually(t, "dangling owner reference removed from the dependent with a live owner", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(kept), kept); err != nil {
			return false, err // NotFound included: it must survive
		}
		return len(kept.OwnerReferences) == 1, nil
	})
	if ref := kept.OwnerReferences[0]; ref.UID != alive.UID {
		t.Errorf("remaining owner reference %+v, want the live owner %s", ref, alive.UID)
	}
	if kept.DeletionTimestamp != nil {
		t.Errorf("dependent with a live owner is being deleted")
	}
}

func TestClusterJobCompletes(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t) // kwok completes the pod; a real pause container never exits
	ctx := t.Context()
	ns := c.FreshNamespace(ctx, t, "e2e-job")

	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unpack"},
		Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{
				Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if err := c.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Job Complete", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), job); err != nil {
			return false, err
		}
		for _, cond := range job.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job failed: %s", cond.Message)
			}
			if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if job.Status.Succeeded != 1 {
		t.Errorf("job status %+v, want 1 succeeded pod", job.Status)
	}
}

// TestExitedComponentsStartedAgain: a component that has exited (as kube-controller-manager and
// kube-scheduler do when the kube-apiserver is slow to turn healthy at their start) is started
// again by StartExited, which cluster.Start calls once the kube-apiserver serves; running ones are
// left alone.
func TestExitedComponentsStartedAgain(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t)
	ctx := t.Context()
	if err := c.StopComponent(ctx, cluster.KubeScheduler); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartComponent(context.Background(), cluster.KubeScheduler); err != nil {
			t.Errorf("starting kube-scheduler again: %v", err)
		}
	})
	started, err := c.StartExited(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(started, []string{cluster.KubeScheduler}) {
		t.Errorf("StartExited started %v, want only the stopped %s", started, cluster.KubeScheduler)
	}
	for _, name := range []string{cluster.KubeControllerManager, cluster.KubeScheduler, cluster.KwokController} {
		if running, err := c.ComponentRunning(name); err != nil || !running {
			t.Errorf("%s running=%t after StartExited (%v)", name, running, err)
		}
	}
}

func TestClusterControllerManagerRestart(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t)
	ctx := t.Context()
	ns := c.FreshNamespace(ctx, t, "e2e-kcm")

	if err := c.StopComponent(ctx, cluster.KubeControllerManager); err != nil {
		t.Fatal(err)
	}
	// Whatever happens below, the next tests need kube-controller-manager.
	t.Cleanup(func() {
		if err := c.StartComponent(context.Background(), cluster.KubeControllerManager); err != nil {
			t.Errorf("starting kube-controller-manager again: %v", err)
		}
	})
	if running, err := c.ComponentRunning(cluster.KubeControllerManager); err != nil || running {
		t.Fatalf("kube-controller-manager running=%t after StopComponent (%v)", running, err)
	}

	// An owner deleted while nobody collects garbage...
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := c.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	dependent := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dependent",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}}}
	if err := c.Client.Create(ctx, dependent); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Delete(ctx, owner, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}

	// ...is collected once kube-controller-manager is back.
	if err := c.StartComponent(ctx, cluster.KubeControllerManager); err != nil {
		t.Fatal(err)
	}
	if running, err := c.ComponentRunning(cluster.KubeControllerManager); err != nil || !running {
		t.Fatalf("kube-controller-manager running=%t after StartComponent (%v)", running, err)
	}
	testenv.Eventually(t, "dependent collected by the restarted garbage collector", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(dependent), &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	})
}
