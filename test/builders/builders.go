// Package builders makes the Kubernetes and OLM objects olmguard's tests write or decide on. It
// imports only API types and olmguard's foundation and knowledge packages, never a harness that
// starts processes or clusters, so a unit test that needs an object links nothing more.
package builders

import (
	"fmt"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/unpack"
)

// Subscription is an unresolvable Subscription to package pkg: its catalog does not exist, so
// neither OLM nor the simulator installs anything for it. Tests of admission and of the
// reconcilers write it and the plans that name it themselves.
func Subscription(ns, name, pkg string, approval v1alpha1.Approval) *v1alpha1.Subscription {
	return &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SubscriptionSpec{CatalogSource: "none", CatalogSourceNamespace: ns, Package: pkg, InstallPlanApproval: approval}}
}

// InstallPlan is an approved, automatic plan in ns with a generated name, as OLM writes one
// before its first status.
func InstallPlan(ns string) *v1alpha1.InstallPlan {
	return &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{GenerateName: "install-", Namespace: ns},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"x.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true, Generation: 1}}
}

// UnpackJob is the view of a bundle unpack Job as OLM v0.26+ creates it in namespace olm:
// named after the bundle, labelled, owned by its unpack ConfigMap.
func UnpackJob() unpack.Job {
	name := olm.UnpackName("registry.example/b:v1")
	return unpack.Job{Namespace: "olm", Name: name,
		Labels:          map[string]string{olm.ManagedLabel: "true", olm.BundleUnpackRefLabel: name},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: "u"}}}
}

// Node is a node of zone whose Ready condition has had status ready since then ("" : no Ready
// condition at all, a node that never reported).
func Node(name, zone string, ready corev1.ConditionStatus, since time.Time) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(since)}}
	}
	return n
}

// CatalogSourceUID is the UID of CatalogSource olm/cat, the owner of CatalogPod.
const CatalogSourceUID = "cat-uid"

// CatalogPod is the pod of CatalogSource olm/cat scheduled to nodeName, with the labels and the
// controller ownerReference OLM sets; deleted, when not nil, is its deletionTimestamp.
func CatalogPod(nodeName string, deleted *time.Time) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cat-abc", Namespace: "olm", Labels: map[string]string{olm.CatalogSourceLabel: "cat"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: "cat", UID: CatalogSourceUID,
			Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}},
		Spec: corev1.PodSpec{NodeName: nodeName}}
	if deleted != nil {
		p.DeletionTimestamp = &metav1.Time{Time: *deleted}
	}
	return p
}

// LargeSubscriptionVars variables of LargeSubscriptionVarSize bytes make a LargeSubscription.
const (
	LargeSubscriptionVars    = 16
	LargeSubscriptionVarSize = 64 << 10
)

// LargeSubscription is an unresolvable Subscription to package pkg of about 1 MiB: its
// spec.config.env holds 16 variables of 64 KiB (etcd's default request limit is 1.5 MiB). A
// tenant who may create Subscriptions decides their size; tests of bounded reads write many.
func LargeSubscription(ns, name, pkg, approval string) *unstructured.Unstructured {
	value := strings.Repeat("v", LargeSubscriptionVarSize)
	env := make([]any, LargeSubscriptionVars)
	for i := range env {
		env[i] = map[string]any{"name": fmt.Sprintf("BIG_%d", i), "value": value}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": olm.V1alpha1APIVersion, "kind": olm.SubscriptionKind,
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"name": pkg, "source": "cat", "sourceNamespace": ns, "channel": "stable",
			"installPlanApproval": approval, "config": map[string]any{"env": env}}}}
}

// SuspendedJob is a Job that never runs: load for a cache of Jobs (the scale measurements).
func SuspendedJob(ns, name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.JobSpec{Suspend: ptr.To(true), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}}}
}

// UnscheduledPod is a Pod bound to a node that does not exist, so nothing runs it: load for a
// cache of Pods (the scale measurements).
func UnscheduledPod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
}
