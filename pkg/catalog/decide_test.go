package catalog_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/catalog"
	"github.com/olmguard/olmguard/test/builders"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	const grace = 30 * time.Second
	healthy := []corev1.Node{builders.Node("a", "z1", corev1.ConditionTrue, now.Add(-(time.Hour))), builders.Node("b", "z2", corev1.ConditionTrue, now.Add(-(time.Hour))), builders.Node("c", "z3", corev1.ConditionTrue, now.Add(-(time.Hour)))}
	with := func(n corev1.Node) []corev1.Node { return append([]corev1.Node{n}, healthy[1:]...) }
	unknownLong, unknownShort := builders.Node("a", "z1", corev1.ConditionUnknown, now.Add(-(time.Minute))), builders.Node("a", "z1", corev1.ConditionUnknown, now.Add(-(10*time.Second)))
	falseLong, noCond := builders.Node("a", "z1", corev1.ConditionFalse, now.Add(-(time.Minute))), builders.Node("a", "z1", "", now.Add(-(0)))
	noCond.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	ready := healthy[0]
	tests := []struct {
		name      string
		pod       *corev1.Pod
		node      *corev1.Node
		goneSince time.Time
		nodes     []corev1.Node
		want      catalog.Decision
	}{
		{"ready node: never", builders.CatalogPod("a", nil), &ready, time.Time{}, healthy, catalog.Decision{Reason: catalog.ReasonNodeReady}},
		{"terminating on a ready node: never", builders.CatalogPod("a", &now), &ready, time.Time{}, healthy, catalog.Decision{Reason: catalog.ReasonNodeReady}},
		{"unknown past grace: delete", builders.CatalogPod("a", nil), &unknownLong, time.Time{}, with(unknownLong), catalog.Decision{Delete: true, Reason: catalog.ReasonNodeNotReady}},
		{"false past grace: delete", builders.CatalogPod("a", nil), &falseLong, time.Time{}, with(falseLong), catalog.Decision{Delete: true, Reason: catalog.ReasonNodeNotReady}},
		{"within grace: requeue when it ends", builders.CatalogPod("a", nil), &unknownShort, time.Time{}, with(unknownShort), catalog.Decision{Reason: catalog.ReasonWithinGrace, RequeueAfter: 20 * time.Second}},
		{"terminating on a NotReady node: delete at once", builders.CatalogPod("a", &now), &unknownShort, time.Time{}, with(unknownShort), catalog.Decision{Delete: true, Reason: catalog.ReasonPodTerminating}},
		{"node never reported: counted from creation", builders.CatalogPod("a", nil), &noCond, time.Time{}, with(noCond), catalog.Decision{Delete: true, Reason: catalog.ReasonNodeNotReady}},
		{"node gone past grace: delete", builders.CatalogPod("gone", nil), nil, now.Add(-time.Minute), healthy, catalog.Decision{Delete: true, Reason: catalog.ReasonNodeGone}},
		{"node gone within grace: requeue", builders.CatalogPod("gone", nil), nil, now.Add(-20 * time.Second), healthy, catalog.Decision{Reason: catalog.ReasonWithinGrace, RequeueAfter: 10 * time.Second}},
		{"unscheduled: nothing", builders.CatalogPod("", nil), nil, time.Time{}, healthy, catalog.Decision{Reason: catalog.ReasonNotScheduled}},
		{"not a catalog pod: nothing", &corev1.Pod{Spec: corev1.PodSpec{NodeName: "a"}}, &unknownLong, time.Time{}, with(unknownLong), catalog.Decision{Reason: catalog.ReasonNotCatalogPod}},
		{"two of three nodes down: nothing", builders.CatalogPod("a", nil), &unknownLong, time.Time{},
			[]corev1.Node{unknownLong, builders.Node("b", "z2", corev1.ConditionUnknown, now.Add(-(time.Minute))), healthy[2]}, catalog.Decision{Reason: catalog.ReasonClusterOutage}},
		{"two of three down, pod terminating: still nothing", builders.CatalogPod("a", &now), &unknownLong, time.Time{},
			[]corev1.Node{unknownLong, builders.Node("b", "z2", corev1.ConditionUnknown, now.Add(-(time.Minute))), healthy[2]}, catalog.Decision{Reason: catalog.ReasonClusterOutage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := catalog.Decide(tt.pod, builders.CatalogSourceUID, tt.node, tt.goneSince, now, grace, catalog.NodeHealth(tt.nodes))
			if got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Only a pod owned by a CatalogSource that exists in its namespace is ever deleted: the label
// olm.catalogSource and an ownerReference are both written by whoever creates the pod. Every case
// is a pod on a node NotReady past the grace, which the code before the fix deleted on its label
// alone: fails before the fix for all rows but the last (Decide took no CatalogSource UID and
// deleted each of them).
func TestDecideOnlyPodsOfALiveCatalogSource(t *testing.T) {
	const grace = 30 * time.Second
	down := builders.Node("a", "z1", corev1.ConditionUnknown, now.Add(-time.Minute))
	nodes := []corev1.Node{down, builders.Node("b", "z2", corev1.ConditionTrue, now.Add(-time.Hour)), builders.Node("c", "z3", corev1.ConditionTrue, now.Add(-time.Hour))}
	owned := func(edit func(r *metav1.OwnerReference)) *corev1.Pod {
		p := builders.CatalogPod("a", nil)
		if edit == nil {
			p.OwnerReferences = nil
		} else {
			edit(&p.OwnerReferences[0])
		}
		return p
	}
	tests := []struct {
		name string
		pod  *corev1.Pod
		uid  types.UID // of the CatalogSource the reconciler found ("" = none of that name)
		want catalog.Decision
	}{
		{"label only, no owner", owned(nil), builders.CatalogSourceUID, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"owner with the wrong UID", owned(func(r *metav1.OwnerReference) { r.UID = "forged" }), builders.CatalogSourceUID, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"kind CatalogSource in another apiVersion", owned(func(r *metav1.OwnerReference) { r.APIVersion = "evil.example/v1alpha1" }), builders.CatalogSourceUID, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"another kind of the group", owned(func(r *metav1.OwnerReference) { r.Kind = "Subscription" }), builders.CatalogSourceUID, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"owner CatalogSource does not exist", owned(func(*metav1.OwnerReference) {}), "", catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"owner without a UID, none found", owned(func(r *metav1.OwnerReference) { r.UID = "" }), "", catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"owned by the live CatalogSource", owned(func(*metav1.OwnerReference) {}), builders.CatalogSourceUID, catalog.Decision{Delete: true, Reason: catalog.ReasonNodeNotReady}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := catalog.Decide(tt.pod, tt.uid, &down, time.Time{}, now, grace, catalog.NodeHealth(nodes)); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func zoneNodes(zone string, total, notReady int) []corev1.Node {
	var out []corev1.Node
	for i := range total {
		st := corev1.ConditionTrue
		if i < notReady {
			st = corev1.ConditionUnknown
		}
		out = append(out, builders.Node(fmt.Sprintf("%s-%d", zone, i), zone, st, now.Add(-time.Minute)))
	}
	return out
}

func TestOutage(t *testing.T) {
	tests := []struct {
		name  string
		nodes []corev1.Node
		zone  string
		want  catalog.Reason
	}{
		{"one node of three", append(zoneNodes("z1", 1, 1), zoneNodes("z2", 2, 0)...), "z1", catalog.ReasonNone},
		{"a single-node zone losing its node is a node failure", append(zoneNodes("z1", 1, 1), zoneNodes("z2", 3, 0)...), "z1", catalog.ReasonNone},
		{"more than 55% of all nodes", zoneNodes("z1", 9, 5), "z1", catalog.ReasonClusterOutage},
		{"exactly 55% is not more", zoneNodes("", 20, 11), "", catalog.ReasonNone},
		{"a zone mostly down", append(zoneNodes("z1", 4, 3), zoneNodes("z2", 10, 0)...), "z1", catalog.ReasonZoneOutage},
		{"another zone mostly down does not block this one", append(zoneNodes("z1", 4, 3), zoneNodes("z2", 10, 1)...), "z2", catalog.ReasonNone},
		{"no nodes", nil, "", catalog.ReasonNone},
	}
	for _, tt := range tests {
		if got := catalog.NodeHealth(tt.nodes).Outage(tt.zone); got != tt.want {
			t.Errorf("%s: Outage = %q, want %q", tt.name, got, tt.want)
		}
	}
}
