package realolm

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// N3 (OLM #3459, #3519, OCPBUGS-46474): OLM recreates a catalog's registry pod only when its
// health check fails, and never reads the pod's phase: a Failed pod without a DisruptionTarget
// condition (a kubelet eviction) is kept for good, even by v0.46.0.

// NewRegistryCatalog is an image-backed gRPC CatalogSource: OLM runs a registry pod for it (kwok
// "runs" it; nothing is pulled).
func NewRegistryCatalog(ns, name string) *v1alpha1.CatalogSource {
	return &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: "olmguard.test/" + name + ":latest", DisplayName: name}}
}

// RegistryPods lists the pods of cs (label olm.catalogSource).
func RegistryPods(ctx context.Context, c client.Client, cs *v1alpha1.CatalogSource) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := c.List(ctx, pods, client.InNamespace(cs.Namespace), client.MatchingLabels{olm.CatalogSourceLabel: cs.Name})
	return pods.Items, err
}

// SettledRegistryPod waits until OLM reports cs's registry Service in its status and cs has had
// one and the same registry pod, Running, for three reads in a row after that (OLM replaces its
// first pod once while the catalog's Service and ServiceAccount appear), and returns it.
func SettledRegistryPod(ctx context.Context, c client.Client, cs *v1alpha1.CatalogSource) (*corev1.Pod, error) {
	var last *corev1.Pod
	same := 0
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		now := &v1alpha1.CatalogSource{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cs), now); err != nil {
			return false, err
		}
		if now.Status.RegistryService == nil || now.Status.RegistryService.ServiceName == "" {
			last, same = nil, 0
			return false, nil
		}
		pods, err := RegistryPods(ctx, c, cs)
		if err != nil {
			return false, err
		}
		if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning || pods[0].DeletionTimestamp != nil {
			last, same = nil, 0
			return false, nil
		}
		if last != nil && pods[0].UID == last.UID {
			same++
		} else {
			last, same = &pods[0], 1
		}
		time.Sleep(500 * time.Millisecond)
		return same >= 3, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no settled registry pod of CatalogSource %s/%s: %w", cs.Namespace, cs.Name, err)
	}
	return last, nil
}

// EvictPod writes to p's status what the kubelet writes when it evicts a pod under memory
// pressure: phase Failed, reason Evicted, the containers terminated, not Ready; no DisruptionTarget
// condition, which OLM v0.32 on would take as dead. podIP and hostIP stay, as the kubelet leaves
// them: kwok rewrites the status of a pod without a podIP (to Running) or with a deletionTimestamp,
// and leaves this one as written.
func EvictPod(ctx context.Context, c client.Client, p *corev1.Pod) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	var containers []map[string]any
	for _, cs := range p.Status.ContainerStatuses {
		containers = append(containers, map[string]any{"name": cs.Name, "image": cs.Image, "imageID": cs.ImageID, "ready": false,
			"restartCount": cs.RestartCount, "started": false,
			"state": map[string]any{"terminated": map[string]any{"exitCode": 137, "reason": "Error", "finishedAt": now}}})
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"phase":   corev1.PodFailed,
		"reason":  "Evicted",
		"message": "The node was low on resource: memory. Threshold quantity: 100Mi, available: 80Mi.",
		"conditions": []map[string]any{
			{"type": corev1.PodReady, "status": corev1.ConditionFalse, "reason": "PodFailed", "lastTransitionTime": now},
			{"type": corev1.ContainersReady, "status": corev1.ConditionFalse, "reason": "PodFailed", "lastTransitionTime": now},
		},
		"containerStatuses": containers,
	}})
	if err != nil {
		return err
	}
	if err := c.Status().Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
		return fmt.Errorf("evicting %s: %w", p.Name, err)
	}
	if p.Status.Phase != corev1.PodFailed || p.Status.PodIP == "" {
		return fmt.Errorf("evicted pod %s: phase %s, podIP %q", p.Name, p.Status.Phase, p.Status.PodIP)
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.DisruptionTarget {
			return fmt.Errorf("evicted pod %s carries %s=%s: this scenario is the Failed pod without it", p.Name, cond.Type, cond.Status)
		}
	}
	return nil
}

// SettleAndEvict waits for cs's settled registry pod (SettledRegistryPod) and evicts it
// (EvictPod). A pod OLM replaced between the two (its one replacement of a first pod, late on a
// busy machine) is not an eviction: it settles again, at most three times.
func SettleAndEvict(ctx context.Context, c client.Client, cs *v1alpha1.CatalogSource) (*corev1.Pod, error) {
	var err error
	for range 3 {
		var p *corev1.Pod
		if p, err = SettledRegistryPod(ctx, c, cs); err != nil {
			return nil, err
		}
		if err = EvictPod(ctx, c, p); !apierrors.IsNotFound(err) {
			return p, err
		}
	}
	return nil, fmt.Errorf("OLM kept replacing the registry pod of %s/%s: %w", cs.Namespace, cs.Name, err)
}

// FailedPodKept watches cs for window after its registry pod dead was evicted, and returns nil
// when dead stayed, Failed, the catalog's only pod throughout: what stock OLM does. Nothing
// happening is the claim, so a slow machine cannot make it fail.
func FailedPodKept(ctx context.Context, c client.Client, cs *v1alpha1.CatalogSource, dead *corev1.Pod, window time.Duration) error {
	deadline := time.Now().Add(window)
	for time.Now().Before(deadline) {
		pods, err := RegistryPods(ctx, c, cs)
		if err != nil {
			return err
		}
		found := false
		for _, p := range pods {
			switch {
			case p.UID != dead.UID:
				return fmt.Errorf("OLM created registry pod %s beside the Failed %s", p.Name, dead.Name)
			case p.Status.Phase != corev1.PodFailed:
				return fmt.Errorf("the evicted pod %s turned %s again: something (kwok?) rewrote its status", p.Name, p.Status.Phase)
			}
			found = true
		}
		if !found {
			return fmt.Errorf("the Failed registry pod %s was removed", dead.Name)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return nil
}

// FailedPodReplaced waits until the Failed registry pod dead is gone and another pod of cs runs,
// and returns that one.
func FailedPodReplaced(ctx context.Context, c client.Client, cs *v1alpha1.CatalogSource, dead *corev1.Pod) (*corev1.Pod, error) {
	var after *corev1.Pod
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(dead), &corev1.Pod{}); !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		pods, err := RegistryPods(ctx, c, cs)
		if err != nil {
			return false, err
		}
		for i, p := range pods {
			if p.UID != dead.UID && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				after = &pods[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the Failed registry pod %s was not replaced by a Running one: %w", dead.Name, err)
	}
	return after, nil
}
