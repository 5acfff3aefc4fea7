// Package unpack holds F4's knowledge (OLM issue #3210): what an OLM bundle unpack Job and its
// ConfigMap are, the namespace-scoped name olmguard gives a new one, and what to do with one OLM
// can no longer see. A Job without the bundle-unpack-ref or olm.managed label is invisible to OLM
// v0.26+, and a finished one of those makes every later install of the same bundle fail with
// "already exists". The Job webhook, the unpack-jobs reconciler and doctor decide with it.
package unpack

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Action is what to do with an unpack Job.
type Action string

const (
	None   Action = ""
	Label  Action = "Label"  // add the labels OLM finds it by
	Delete Action = "Delete" // delete it (and its pods)
)

// Decision is the outcome for one Job.
type Decision struct {
	Action       Action
	Reason       string
	RequeueAfter time.Duration
}

// Visible reports whether OLM v0.26+ can find the Job: it lists unpack Jobs by the
// bundle-unpack-ref label through an informer filtered on olm.managed=true.
func Visible(j *batchv1.Job) bool { return FoundByLabel(j.Labels) }

// FoundByLabel reports whether labels are those OLM v0.26+ lists unpack Jobs by: a
// bundle-unpack-ref and olm.managed=true.
func FoundByLabel(labels map[string]string) bool {
	return labels[olm.BundleUnpackRefLabel] != "" && labels[olm.ManagedLabel] == olm.ManagedLabelValue
}

// Finished returns whether the Job completed or failed, and when.
func Finished(j *batchv1.Job) (bool, time.Time) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			if j.Status.CompletionTime != nil {
				return true, j.Status.CompletionTime.Time
			}
			return true, c.LastTransitionTime.Time
		}
	}
	return false, time.Time{}
}

// Decide chooses what to do with an unpack Job owned by an OLM unpack ConfigMap. A running Job is
// never deleted; the ConfigMap is never touched (OLM reads it when the plan executes).
func Decide(j *batchv1.Job, now time.Time, ttl time.Duration) Decision {
	finished, at := Finished(j)
	switch {
	case !Visible(j) && finished:
		return Decision{Action: Delete, Reason: "FinishedJobInvisibleToOLM"}
	case !Visible(j):
		return Decision{Action: Label, Reason: "RunningJobInvisibleToOLM"}
	case !finished || j.Spec.TTLSecondsAfterFinished != nil || ttl <= 0:
		return Decision{} // running, or the TTL controller removes it
	}
	if wait := at.Add(ttl).Sub(now); wait > 0 {
		return Decision{Reason: "WithinTTL", RequeueAfter: wait}
	}
	return Decision{Action: Delete, Reason: "FinishedWithoutTTL"}
}

// ConfigMapOwner is the name of the ConfigMap owning the Job, "" if none.
func ConfigMapOwner(o metav1.Object) string {
	r, _ := ConfigMapOwnerRef(o)
	return r.Name
}

// ConfigMapOwnerRef is the ownerReference of the ConfigMap owning the Job: apiVersion v1, kind
// ConfigMap. Its name and UID are whatever the Job's writer put there: IsUnpackOwner checks them
// against the ConfigMap read from the cluster.
func ConfigMapOwnerRef(o metav1.Object) (metav1.OwnerReference, bool) {
	for _, r := range o.GetOwnerReferences() {
		if r.Kind == "ConfigMap" && r.APIVersion == "v1" {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// IsUnpackOwner reports whether cm, as read from the cluster, is the ConfigMap a Job's
// ownerReference ref names (same name and UID) and one of OLM's unpack ConfigMaps. Anyone who
// may create a Job can point its ownerReference at any name and UID; the garbage collector never
// removes a Job whose owner does not exist.
func IsUnpackOwner(cm *corev1.ConfigMap, ref metav1.OwnerReference) bool {
	return cm.Name == ref.Name && cm.UID != "" && cm.UID == ref.UID && IsOLMConfigMap(cm)
}

// IsOLMConfigMap reports whether a ConfigMap is one of OLM's bundle unpack ConfigMaps: managed
// by OLM and owned by a CatalogSource.
func IsOLMConfigMap(cm *corev1.ConfigMap) bool {
	_, ok := CatalogSourceOwner(cm)
	return ok
}

// CatalogSourceOwner returns the CatalogSource owner of an OLM-managed ConfigMap: the first
// ownerReference as OLM writes it (olm.IsCatalogSourceRef: operators.coreos.com/v1alpha1, kind
// CatalogSource, a name and a UID), the rule pkg/catalog applies to registry pods.
func CatalogSourceOwner(cm *corev1.ConfigMap) (metav1.OwnerReference, bool) {
	if cm.Labels[olm.ManagedLabel] != olm.ManagedLabelValue {
		return metav1.OwnerReference{}, false
	}
	for _, r := range cm.OwnerReferences {
		if olm.IsCatalogSourceRef(r) {
			return r, true
		}
	}
	return metav1.OwnerReference{}, false
}

// WaitingSubscriptions are the Subscriptions to the CatalogSource catalogNamespace/catalogName that
// may be waiting on a bundle of it: every one not AtLatestKnown. A resolution that failed on a
// Job OLM could not see is retried by OLM only after a back-off that grows to minutes (client-go's
// per-item rate limiter), so once the Job is gone they are nudged (OLM issue #3210).
func WaitingSubscriptions(subs []v1alpha1.Subscription, catalogNamespace, catalogName string) []*v1alpha1.Subscription {
	var out []*v1alpha1.Subscription
	for i := range subs {
		s := &subs[i]
		if s.Spec.CatalogSource == catalogName && s.Spec.CatalogSourceNamespace == catalogNamespace &&
			s.DeletionTimestamp == nil && s.Status.State != v1alpha1.SubscriptionStateAtLatest {
			out = append(out, s)
		}
	}
	return out
}
