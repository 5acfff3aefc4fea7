package catalogpods

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func node(name, zone string, ready corev1.ConditionStatus, since time.Duration) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ZoneLabel: zone}}}
	if ready != "" {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.NewTime(now.Add(-since))}}
	}
	return n
}

func catalogPod(nodeName string, terminating bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cat-abc", Namespace: "olm", Labels: map[string]string{"olm.catalogSource": "cat"}},
		Spec: corev1.PodSpec{NodeName: nodeName}}
	if terminating {
		p.DeletionTimestamp = &metav1.Time{Time: now}
	}
	return p
}

func TestDecide(t *testing.T) {
	const grace = 30 * time.Second
	healthy := []corev1.Node{node("a", "z1", corev1.ConditionTrue, time.Hour), node("b", "z2", corev1.ConditionTrue, time.Hour), node("c", "z3", corev1.ConditionTrue, time.Hour)}
	with := func(n corev1.Node) []corev1.Node { return append([]corev1.Node{n}, healthy[1:]...) }
	unknownLong, unknownShort := node("a", "z1", corev1.ConditionUnknown, time.Minute), node("a", "z1", corev1.ConditionUnknown, 10*time.Second)
	falseLong, noCond := node("a", "z1", corev1.ConditionFalse, time.Minute), node("a", "z1", "", 0)
	noCond.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
	ready := healthy[0]
	tests := []struct {
		name      string
		pod       *corev1.Pod
		node      *corev1.Node
		goneSince time.Time
		nodes     []corev1.Node
		want      Decision
	}{
		{"ready node: never", catalogPod("a", false), &ready, time.Time{}, healthy, Decision{Reason: ReasonNodeReady}},
		{"terminating on a ready node: never", catalogPod("a", true), &ready, time.Time{}, healthy, Decision{Reason: ReasonNodeReady}},
		{"unknown past grace: delete", catalogPod("a", false), &unknownLong, time.Time{}, with(unknownLong), Decision{Delete: true, Reason: ReasonNodeNotReady}},
		{"false past grace: delete", catalogPod("a", false), &falseLong, time.Time{}, with(falseLong), Decision{Delete: true, Reason: ReasonNodeNotReady}},
		{"within grace: requeue when it ends", catalogPod("a", false), &unknownShort, time.Time{}, with(unknownShort), Decision{Reason: ReasonWithinGrace, RequeueAfter: 20 * time.Second}},
		{"terminating on a NotReady node: delete at once", catalogPod("a", true), &unknownShort, time.Time{}, with(unknownShort), Decision{Delete: true, Reason: ReasonPodTerminating}},
		{"node never reported: counted from creation", catalogPod("a", false), &noCond, time.Time{}, with(noCond), Decision{Delete: true, Reason: ReasonNodeNotReady}},
		{"node gone past grace: delete", catalogPod("gone", false), nil, now.Add(-time.Minute), healthy, Decision{Delete: true, Reason: ReasonNodeGone}},
		{"node gone within grace: requeue", catalogPod("gone", false), nil, now.Add(-20 * time.Second), healthy, Decision{Reason: ReasonWithinGrace, RequeueAfter: 10 * time.Second}},
		{"unscheduled: nothing", catalogPod("", false), nil, time.Time{}, healthy, Decision{Reason: ReasonNotScheduled}},
		{"not a catalog pod: nothing", &corev1.Pod{Spec: corev1.PodSpec{NodeName: "a"}}, &unknownLong, time.Time{}, with(unknownLong), Decision{Reason: ReasonNotCatalogPod}},
		{"two of three nodes down: nothing", catalogPod("a", false), &unknownLong, time.Time{},
			[]corev1.Node{unknownLong, node("b", "z2", corev1.ConditionUnknown, time.Minute), healthy[2]}, Decision{Reason: ReasonClusterOutage}},
		{"two of three down, pod terminating: still nothing", catalogPod("a", true), &unknownLong, time.Time{},
			[]corev1.Node{unknownLong, node("b", "z2", corev1.ConditionUnknown, time.Minute), healthy[2]}, Decision{Reason: ReasonClusterOutage}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.pod, tt.node, tt.goneSince, now, grace, NodeHealth(tt.nodes))
			if got != tt.want {
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
		out = append(out, node(fmt.Sprintf("%s-%d", zone, i), zone, st, time.Minute))
	}
	return out
}

func TestOutage(t *testing.T) {
	tests := []struct {
		name  string
		nodes []corev1.Node
		zone  string
		want  Reason
	}{
		{"one node of three", append(zoneNodes("z1", 1, 1), zoneNodes("z2", 2, 0)...), "z1", ReasonNone},
		{"a single-node zone losing its node is a node failure", append(zoneNodes("z1", 1, 1), zoneNodes("z2", 3, 0)...), "z1", ReasonNone},
		{"more than 55% of all nodes", zoneNodes("z1", 9, 5), "z1", ReasonClusterOutage},
		{"exactly 55% is not more", zoneNodes("", 20, 11), "", ReasonNone},
		{"a zone mostly down", append(zoneNodes("z1", 4, 3), zoneNodes("z2", 10, 0)...), "z1", ReasonZoneOutage},
		{"another zone mostly down does not block this one", append(zoneNodes("z1", 4, 3), zoneNodes("z2", 10, 1)...), "z2", ReasonNone},
		{"no nodes", nil, "", ReasonNone},
	}
	for _, tt := range tests {
		if got := NodeHealth(tt.nodes).Outage(tt.zone); got != tt.want {
			t.Errorf("%s: Outage = %q, want %q", tt.name, got, tt.want)
		}
	}
}
