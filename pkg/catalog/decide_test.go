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

// A registry pod in a terminal phase serves nothing, and OLM keeps it: its health check never reads
// the phase (OLM #3459, #3519, OCPBUGS-46474; v0.46.0 still keeps a Failed pod without a
// DisruptionTarget condition, and OLM before v0.32 one with DisruptionTarget=True but no
// deletionTimestamp, as the kubelet's eviction leaves it). Such a pod is deleted at once, on
// whatever node, but only when a live CatalogSource owns it; a pod still running with
// DisruptionTarget=True is left to the kubelet that is terminating it.
// Fails before the fix: every terminal pod on a Ready node was left (NodeReady), and the ones on a
// node within its grace or during an outage waited or were held.
func TestDecideTerminalPods(t *testing.T) {
	const grace = 30 * time.Second
	ready := builders.Node("a", "z1", corev1.ConditionTrue, now.Add(-time.Hour))
	healthy := []corev1.Node{ready, builders.Node("b", "z2", corev1.ConditionTrue, now.Add(-time.Hour)), builders.Node("c", "z3", corev1.ConditionTrue, now.Add(-time.Hour))}
	justDown := builders.Node("a", "z1", corev1.ConditionUnknown, now.Add(-10*time.Second))
	longDown := builders.Node("a", "z1", corev1.ConditionUnknown, now.Add(-time.Minute))
	outage := []corev1.Node{longDown, builders.Node("b", "z2", corev1.ConditionUnknown, now.Add(-time.Minute)), healthy[2]}
	disruption := func(reason string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: reason}
	}
	pod := func(node string, deleted *time.Time, phase corev1.PodPhase, reason string, conds ...corev1.PodCondition) *corev1.Pod {
		p := builders.CatalogPod(node, deleted)
		p.Status = corev1.PodStatus{Phase: phase, Reason: reason, Conditions: conds}
		return p
	}
	lookAlike := func(edit func(p *corev1.Pod)) *corev1.Pod {
		p := pod("a", nil, corev1.PodFailed, "Evicted")
		edit(p)
		return p
	}
	failed := catalog.Decision{Delete: true, Reason: catalog.ReasonPodFailed}
	tests := []struct {
		name  string
		pod   *corev1.Pod
		uid   types.UID // of the CatalogSource named by the pod's owner ("" = none of that name)
		node  *corev1.Node
		nodes []corev1.Node
		want  catalog.Decision
	}{
		{"evicted on a Ready node, no DisruptionTarget (v0.46.0 keeps it)", pod("a", nil, corev1.PodFailed, "Evicted"), builders.CatalogSourceUID, &ready, healthy, failed},
		{"evicted with DisruptionTarget=True (OLM before v0.32 keeps it)", pod("a", nil, corev1.PodFailed, "Evicted", disruption("TerminationByKubelet")), builders.CatalogSourceUID, &ready, healthy, failed},
		{"stopped on a node shutdown", pod("a", nil, corev1.PodFailed, "Terminated"), builders.CatalogSourceUID, &ready, healthy, failed},
		{"succeeded", pod("a", nil, corev1.PodSucceeded, ""), builders.CatalogSourceUID, &ready, healthy, failed},
		{"failed and terminating on a Ready node", pod("a", &now, corev1.PodFailed, "Evicted"), builders.CatalogSourceUID, &ready, healthy, failed},
		{"failed on a node within its grace: no wait", pod("a", nil, corev1.PodFailed, "Evicted"), builders.CatalogSourceUID, &justDown, []corev1.Node{justDown, healthy[1], healthy[2]}, failed},
		{"failed on a node that is gone", pod("gone", nil, corev1.PodFailed, "Evicted"), builders.CatalogSourceUID, nil, healthy, failed},
		{"failed and never scheduled", pod("", nil, corev1.PodFailed, ""), builders.CatalogSourceUID, nil, healthy, failed},
		{"failed during a cluster outage: a terminal phase is no false signal", pod("a", nil, corev1.PodFailed, "Evicted"), builders.CatalogSourceUID, &longDown, outage, failed},
		{"running, DisruptionTarget=True, kubelet evicting: left to the kubelet", pod("a", nil, corev1.PodRunning, "", disruption("TerminationByKubelet")), builders.CatalogSourceUID, &ready, healthy, catalog.Decision{Reason: catalog.ReasonNodeReady}},
		{"running, preempted and terminating: left to the kubelet", pod("a", &now, corev1.PodRunning, "", disruption("PreemptionByScheduler")), builders.CatalogSourceUID, &ready, healthy, catalog.Decision{Reason: catalog.ReasonNodeReady}},
		{"running, DisruptionTarget=True, on a node NotReady past grace: the node rule", pod("a", nil, corev1.PodRunning, "", disruption("DeletionByTaintManager")), builders.CatalogSourceUID, &longDown, []corev1.Node{longDown, healthy[1], healthy[2]}, catalog.Decision{Delete: true, Reason: catalog.ReasonNodeNotReady}},
		{"running on a Ready node", pod("a", nil, corev1.PodRunning, ""), builders.CatalogSourceUID, &ready, healthy, catalog.Decision{Reason: catalog.ReasonNodeReady}},
		// A tenant's look-alikes: Failed, labelled olm.catalogSource, but not owned by a live CatalogSource.
		{"look-alike: label only, no owner", lookAlike(func(p *corev1.Pod) { p.OwnerReferences = nil }), builders.CatalogSourceUID, &ready, healthy, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"look-alike: owner with a forged UID", lookAlike(func(p *corev1.Pod) { p.OwnerReferences[0].UID = "forged" }), builders.CatalogSourceUID, &ready, healthy, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"look-alike: owner in another group", lookAlike(func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "evil.example/v1alpha1" }), builders.CatalogSourceUID, &ready, healthy, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"owner CatalogSource deleted", pod("a", nil, corev1.PodFailed, "Evicted"), "", &ready, healthy, catalog.Decision{Reason: catalog.ReasonNotOwned}},
		{"owned but not labelled", lookAlike(func(p *corev1.Pod) { p.Labels = nil }), builders.CatalogSourceUID, &ready, healthy, catalog.Decision{Reason: catalog.ReasonNotCatalogPod}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := catalog.Decide(tt.pod, tt.uid, tt.node, now.Add(-time.Minute), now, grace, catalog.NodeHealth(tt.nodes)); got != tt.want {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}
