// Package unpackjobs keeps OLM's bundle unpack Jobs visible to OLM and tidy (F4, OLM issue
// #3210): a Job without the bundle-unpack-ref or olm.managed label is invisible to OLM v0.26+, and
// a finished one of those makes every later install of the same bundle fail with "already exists".
package unpackjobs

import (
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/olmguard/olmguard/pkg/olm"
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
func Visible(j *batchv1.Job) bool {
	return j.Labels[olm.BundleUnpackRefLabel] != "" && j.Labels[olm.ManagedLabel] == olm.ManagedLabelValue
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
