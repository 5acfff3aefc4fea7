// Package catalog holds F5's knowledge (OLM issue #3208): when a node is Ready, when too many
// nodes are down to act, and which catalog pods stranded on a node that stopped responding may be
// force-deleted. The taint manager only evicts such a pod after minutes, and the kubelet that would
// finish its deletion is gone, so the catalog stays unavailable; catalog pods are stateless gRPC
// servers, so deleting one with grace period 0 lets OLM create a new one on a healthy node. It
// also knows the dead pods OLM keeps on any node (OLM issues #3459, #3519, OCPBUGS-46474): a
// registry pod in a terminal phase, which the kubelet evicted or stopped on a node shutdown. The
// catalog-pods reconciler and doctor decide with it.
package catalog

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm"
)

// ZoneLabel is the well-known topology label nodes are grouped by.
const ZoneLabel = corev1.LabelTopologyZone

// unhealthyThreshold is the fraction of NotReady nodes beyond which olmguard stands back: at that
// point the control plane, not the nodes, is the likelier fault (the node lifecycle controller's
// --unhealthy-zone-threshold default).
const unhealthyThreshold = 0.55

// Reason says why a pod is deleted or left alone.
type Reason string

const (
	ReasonNone           Reason = ""
	ReasonNodeNotReady   Reason = "NodeNotReady"
	ReasonNodeGone       Reason = "NodeGone"
	ReasonPodTerminating Reason = "PodTerminatingOnNotReadyNode"
	ReasonClusterOutage  Reason = "ClusterOutage"
	ReasonZoneOutage     Reason = "ZoneOutage"
	ReasonWithinGrace    Reason = "WithinGrace"
	ReasonNotCatalogPod  Reason = "NotCatalogPod"
	// ReasonNotOwned: the pod carries the label but no CatalogSource of its namespace owns it
	// (a tenant's look-alike, or a pod whose CatalogSource is gone).
	ReasonNotOwned     Reason = "NotOwnedByCatalogSource"
	ReasonNodeReady    Reason = "NodeReady"
	ReasonNotScheduled Reason = "NotScheduled"
	// ReasonPodFailed: the pod is in a terminal phase (Failed, e.g. Evicted; or Succeeded), on
	// whatever node. OLM keeps such a pod as its registry server (OLM #3459, #3519, OCPBUGS-46474).
	ReasonPodFailed Reason = "PodFailed"
)

// Decision is what to do with one catalog pod.
type Decision struct {
	Delete bool
	Reason Reason
	// RequeueAfter is set while the grace period runs: decide again then.
	RequeueAfter time.Duration
}

// Health summarises node readiness, cluster-wide and per zone.
type Health struct {
	Total, NotReady int
	Zones           map[string]ZoneHealth
}

// ZoneHealth counts the nodes of one zone.
type ZoneHealth struct{ Total, NotReady int }

// NodeHealth computes Health from the cluster's nodes.
func NodeHealth(nodes []corev1.Node) Health {
	h := Health{Zones: map[string]ZoneHealth{}}
	for i := range nodes {
		n := &nodes[i]
		bad := !NodeReady(n)
		h.Total++
		z := h.Zones[n.Labels[ZoneLabel]]
		z.Total++
		if bad {
			h.NotReady++
			z.NotReady++
		}
		h.Zones[n.Labels[ZoneLabel]] = z
	}
	return h
}

// Outage reports whether too many nodes are NotReady to act on a node of the given zone:
// more than 55% of all nodes, or of the zone's nodes when more than two of them are NotReady
// (the node lifecycle controller's rule for a disrupted zone: a small zone losing its only node is
// a node failure, not a zone outage).
func (h Health) Outage(zone string) Reason {
	if h.Total > 0 && float64(h.NotReady)/float64(h.Total) > unhealthyThreshold {
		return ReasonClusterOutage
	}
	if z, ok := h.Zones[zone]; ok && zone != "" && z.NotReady > 2 && float64(z.NotReady)/float64(z.Total) > unhealthyThreshold {
		return ReasonZoneOutage
	}
	return ReasonNone
}

// NodeReady reports whether a node's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	c := readyCondition(n)
	return c != nil && c.Status == corev1.ConditionTrue
}

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// CatalogSourceOwner returns the pod's first ownerReference to a CatalogSource
// (operators.coreos.com/v1alpha1): OLM sets one on every registry pod it creates, as controller
// (olm-facts §5.2). Anyone who can create a pod can write such a reference, so it proves nothing
// until a CatalogSource of that name and UID is found in the pod's namespace (Decide).
func CatalogSourceOwner(pod *corev1.Pod) (metav1.OwnerReference, bool) {
	for _, r := range pod.OwnerReferences {
		if olm.IsCatalogSourceRef(r) {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// OwnedByCatalogSource reports whether catalogSourceUID, the UID of the CatalogSource named by the
// pod's CatalogSourceOwner in the pod's namespace ("" when none exists), is the one the pod names.
// An ownerReference to a deleted CatalogSource, or to a recreated one of the same name, fails.
func OwnedByCatalogSource(pod *corev1.Pod, catalogSourceUID types.UID) bool {
	ref, ok := CatalogSourceOwner(pod)
	return ok && catalogSourceUID != "" && ref.UID == catalogSourceUID
}

// PodTerminal reports whether the pod's phase is Failed or Succeeded: the kubelet runs none of its
// containers again, so a registry pod in it serves nothing, wherever it is. The kubelet sets Failed
// when it evicts a pod (reason Evicted: memory or disk pressure) or stops it on a node shutdown
// (reason Terminated or Shutdown); neither sets a deletionTimestamp.
func PodTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded
}

// Decide chooses what to do with a catalog pod. catalogSourceUID is the UID of the CatalogSource
// in the pod's namespace named by its CatalogSourceOwner ("" when there is none): only a pod
// owned by a live CatalogSource is ever deleted, whatever its labels say (a tenant can label any
// pod olm.catalogSource). node is nil when the pod's node does not exist; goneSince is when that
// was first seen. now and grace are the clock and --catalog-pod-grace.
//
// A pod in a terminal phase is deleted at once, on a Ready node too. OLM keeps it as its registry
// server: its health check never reads the pod's phase, only (v0.32 on) a DisruptionTarget=True
// condition, and before that only a DisruptionTarget with a deletionTimestamp, which the kubelet's
// eviction and node shutdown do not set (OLM #3459, #3519, OCPBUGS-46474; v0.46.0 still keeps a
// Failed pod without DisruptionTarget). No grace and no outage guard apply: both are there
// because a NotReady node may be a false signal, and a terminal phase is none; deleting a pod that
// serves nothing can only help.
//
// A pod with DisruptionTarget=True that is not yet terminal is left to the rules below, as any
// other: the disruption is under way and ends without olmguard. The kubelet is evicting it (it
// then turns Failed, deleted by the rule above) or it is being deleted (preemption, the eviction
// API, the taint manager), which its kubelet finishes, after which OLM finds no pod and creates
// one; deleting it earlier would only cut short the graceful termination of a pod that may still
// serve (and OLM v0.32 on deletes it itself). Only when no kubelet will finish it, on a NotReady
// or missing node, is it force-deleted, by the node rules.
func Decide(pod *corev1.Pod, catalogSourceUID types.UID, node *corev1.Node, goneSince, now time.Time, grace time.Duration, health Health) Decision {
	if _, ok := pod.Labels[olm.CatalogSourceLabel]; !ok {
		return Decision{Reason: ReasonNotCatalogPod}
	}
	if !OwnedByCatalogSource(pod, catalogSourceUID) {
		return Decision{Reason: ReasonNotOwned}
	}
	if PodTerminal(pod) {
		return Decision{Delete: true, Reason: ReasonPodFailed}
	}
	if pod.Spec.NodeName == "" {
		return Decision{Reason: ReasonNotScheduled}
	}
	reason := ReasonNodeNotReady
	var since time.Time
	zone := ""
	switch {
	case node == nil:
		reason, since = ReasonNodeGone, goneSince
	case NodeReady(node):
		return Decision{Reason: ReasonNodeReady} // never a pod on a Ready node
	default:
		zone = node.Labels[ZoneLabel]
		if c := readyCondition(node); c != nil {
			since = c.LastTransitionTime.Time
		} else {
			since = node.CreationTimestamp.Time // a node that never reported
		}
	}
	if r := health.Outage(zone); r != ReasonNone {
		return Decision{Reason: r}
	}
	if pod.DeletionTimestamp != nil && node != nil {
		// Already deleted by someone (the taint manager); its kubelet will never confirm it.
		return Decision{Delete: true, Reason: ReasonPodTerminating}
	}
	if wait := since.Add(grace).Sub(now); wait > 0 {
		return Decision{Reason: ReasonWithinGrace, RequeueAfter: wait}
	}
	return Decision{Delete: true, Reason: reason}
}
