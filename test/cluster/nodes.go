package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/catalog"
	"github.com/olmguard/olmguard/test/testenv"
)

var zones = []string{"zone-a", "zone-b", "zone-c"}

// loadNodes finds the nodes test/cluster created earlier (a reused cluster).
func (c *Cluster) loadNodes(ctx context.Context) error {
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes, client.MatchingLabels{NodeTypeLabel: "kwok"}); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		c.addNodeName(n.Name)
	}
	return nil
}

// AddNode creates a kwok-managed node and waits until it is Ready. labels are added to (and may
// override) the defaults: kubernetes.io/hostname, kubernetes.io/os=linux, kubernetes.io/arch=amd64,
// topology.kubernetes.io/zone (zone-a/b/c in turn), topology.kubernetes.io/region=local,
// node.kubernetes.io/instance-type=kwok and type=kwok. Nodes have 16 CPUs, 64Gi of memory and room
// for 110 pods, and no taints. An existing node of that name is fine.
func (c *Cluster) AddNode(ctx context.Context, name string, labels map[string]string) error {
	if !c.managed {
		return ErrNotKwok
	}
	if err := c.createNode(ctx, name, labels, len(c.Nodes())); err != nil {
		return err
	}
	return c.WaitNodeReady(ctx, name, true)
}

func (c *Cluster) createNode(ctx context.Context, name string, extra map[string]string, index int) error {
	labels := map[string]string{
		corev1.LabelHostname:           name,
		corev1.LabelOSStable:           "linux",
		corev1.LabelArchStable:         "amd64",
		corev1.LabelTopologyZone:       zones[index%len(zones)],
		corev1.LabelTopologyRegion:     "local",
		corev1.LabelInstanceTypeStable: "kwok",
		NodeTypeLabel:                  "kwok",
	}
	maps.Copy(labels, extra)
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("16"),
		corev1.ResourceMemory:           resource.MustParse("64Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: labels,
			Annotations: map[string]string{
				KwokNodeAnnotation:             "fake",
				"node.alpha.kubernetes.io/ttl": "0",
			},
		},
		// kube-apiserver keeps a node's status on create (as a kubelet registering does); kwok fills
		// in conditions, addresses and the rest.
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			NodeInfo: corev1.NodeSystemInfo{
				Architecture:    "amd64",
				OperatingSystem: "linux",
				KubeletVersion:  c.serverVersion(),
			},
		},
	}
	if err := c.Client.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	c.addNodeName(name)
	return nil
}

func (c *Cluster) serverVersion() string {
	v, err := c.Clientset.Discovery().ServerVersion()
	if err != nil {
		return ""
	}
	return v.GitVersion
}

// FailNode stops the node's heartbeats by removing its kwok.x-k8s.io/node annotation, as if its
// kubelet died, and returns at once. kube-controller-manager then marks it NotReady (Ready=Unknown,
// taint node.kubernetes.io/unreachable) after its 8 s grace period; wait with WaitNodeReady(false).
// Its pods stay as they are: nothing acts on them any more.
func (c *Cluster) FailNode(ctx context.Context, name string) error {
	return c.annotateNode(ctx, name, nil)
}

// RestoreNode gives the node back to kwok, which marks it Ready again within a second or two; wait
// with WaitNodeReady(true).
func (c *Cluster) RestoreNode(ctx context.Context, name string) error {
	v := "fake"
	return c.annotateNode(ctx, name, &v)
}

// RecoverNode gives a failed node back to kwok, waits until it is Ready, and deletes the pods on
// it that a controller owns and that are still not Ready. While the node was NotReady the node
// lifecycle controller marked its pods NotReady, and kwok readies a pod only before it has an IP,
// never again: their Deployments would stay unavailable for good, and OLM would reinstall the CSVs
// that own them thousands of times a minute (seen on every real-OLM build after F5: a hot loop that
// kept both cores busy for the rest of the tier). Their controllers create them again, Ready.
func (c *Cluster) RecoverNode(ctx context.Context, name string) error {
	if err := c.RestoreNode(ctx, name); err != nil {
		return err
	}
	if err := c.WaitNodeReady(ctx, name, true); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := c.Client.List(ctx, pods, client.MatchingFields{"spec.nodeName": name}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil || metav1.GetControllerOf(p) == nil || PodReady(p) {
			continue
		}
		uid := p.UID
		if err := c.Client.Delete(ctx, p, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("replacing pod %s/%s left NotReady on node %s: %w", p.Namespace, p.Name, name, err)
		}
	}
	return nil
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (c *Cluster) annotateNode(ctx context.Context, name string, value *string) error {
	if !c.managed {
		return ErrNotKwok
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]*string{KwokNodeAnnotation: value}},
	})
	if err != nil {
		return err
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	return c.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, patch))
}

// NodeReady reports whether a node is ready for work: Ready as olmguard judges it
// (catalog.NodeReady) and no node.kubernetes.io/unreachable or not-ready taint left.
func NodeReady(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeUnreachable || t.Key == corev1.TaintNodeNotReady {
			return false
		}
	}
	return catalog.NodeReady(n)
}

func readyCondition(n *corev1.Node) corev1.ConditionStatus {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status
		}
	}
	return ""
}

// WaitNodeReady waits until the node is ready for work (ready: see NodeReady) or until its Ready
// condition is no longer True (!ready: Unknown once kube-controller-manager noticed the missing
// heartbeats). Without a deadline on ctx it gives up after testenv.Patience.
func (c *Cluster) WaitNodeReady(ctx context.Context, name string, ready bool) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, testenv.Patience)
		defer cancel()
	}
	node := &corev1.Node{}
	var last error
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if last = c.Client.Get(ctx, client.ObjectKey{Name: name}, node); last != nil {
			return false, nil
		}
		if ready {
			return NodeReady(node), nil
		}
		return !catalog.NodeReady(node), nil
	})
	if err != nil {
		state := fmt.Sprintf("Ready=%q taints=%v", readyCondition(node), node.Spec.Taints)
		if last != nil {
			state = last.Error()
		}
		return fmt.Errorf("node %s not ready=%t: %w (%s)", name, ready, err, state)
	}
	return nil
}
