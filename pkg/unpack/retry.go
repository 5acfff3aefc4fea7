package unpack

import (
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// OLMTTLSeconds is the ttlSecondsAfterFinished OLM v0.43+ sets on its unpack Jobs (OLM PR #3832).
// Those releases also requeue a namespace whose unpack failed, so the TTL controller's removal of
// the Job is OLM's own retry.
const OLMTTLSeconds = 300

// Failed returns the Job's Failed=True condition, if any.
func Failed(j *batchv1.Job) (batchv1.JobCondition, bool) {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c, true
		}
	}
	return batchv1.JobCondition{}, false
}

// retriableReasons are the Job failures a fresh unpack may get past once their cause is gone: the
// deadline (an image that could not be pulled in time, a node that never ran the pod) and the
// backoff limit (the pod failed four times).
var retriableReasons = map[string]bool{batchv1.JobReasonDeadlineExceeded: true, batchv1.JobReasonBackoffLimitExceeded: true}

// FailedUnpack is what the retry decision reads about one failed unpack Job.
type FailedUnpack struct {
	Job *batchv1.Job
	// Others are the other Jobs OLM finds for the same ConfigMap (its bundle-unpack-ref).
	Others []batchv1.Job
	// ConfigMap is the Job's owning OLM unpack ConfigMap.
	ConfigMap *corev1.ConfigMap
	// OLMRetries is true when an OperatorGroup of a Subscription waiting on the catalog sets
	// operatorframework.io/bundle-unpack-min-retry-interval: OLM v0.26+ then retries by itself.
	OLMRetries bool
}

// RetryDecision is the outcome for a failed unpack Job.
type RetryDecision struct {
	// Retry: delete the Job (its pods with it) so that OLM creates it again.
	Retry bool
	// DeleteConfigMap: delete the ConfigMap too (it holds no bundle), so OLM runs a fresh unpack
	// with a new ConfigMap, Role, RoleBinding and ServiceAccount.
	DeleteConfigMap bool
	Reason          string
	RequeueAfter    time.Duration
}

// DecideRetry chooses whether removing a failed unpack Job makes OLM before v0.43 unpack the
// bundle again. Those releases never retry a failed unpack Job by themselves (OLM issue #2265;
// v0.26 to v0.42 only with the OperatorGroup retry annotation): every later resolution finds the
// Failed Job and sets BundleUnpackFailed again. after is how long the Job must have been failed.
func DecideRetry(u FailedUnpack, now time.Time, after time.Duration) RetryDecision {
	cond, failed := Failed(u.Job)
	switch {
	case !failed:
		return RetryDecision{Reason: "NotFailed"}
	case !retriableReasons[cond.Reason]:
		return RetryDecision{Reason: "FailureNotRetriable"}
	case !Visible(u.Job):
		return RetryDecision{Reason: "NotAnOLMUnpackJob"} // F4's Decide handles Jobs OLM cannot see
	case u.Job.Spec.TTLSecondsAfterFinished != nil && *u.Job.Spec.TTLSecondsAfterFinished == OLMTTLSeconds:
		return RetryDecision{Reason: "OLMRetriesAfterTTL"} // v0.43+ (OLM PR #3832)
	case u.OLMRetries:
		return RetryDecision{Reason: "OLMRetryAnnotation"}
	}
	for i := range u.Others {
		if _, f := Failed(&u.Others[i]); !f {
			// Running: an unpack is under way. Complete: OLM uses that one. Either way not ours.
			return RetryDecision{Reason: "OtherUnpackJob"}
		}
	}
	if wait := cond.LastTransitionTime.Add(after).Sub(now); wait > 0 {
		return RetryDecision{Reason: "FailedRecently", RequeueAfter: wait}
	}
	// A ConfigMap holding a bundle may be read by a plan in any namespace: it stays, and the next
	// unpack Job overwrites it.
	empty := len(u.ConfigMap.Data) == 0 && len(u.ConfigMap.BinaryData) == 0
	return RetryDecision{Retry: true, DeleteConfigMap: empty, Reason: "Failed" + cond.Reason}
}

// OLMRetryInterval reports whether an OperatorGroup's annotations turn on OLM's own unpack retries
// (v0.26+): operatorframework.io/bundle-unpack-min-retry-interval set to a positive duration.
func OLMRetryInterval(annotations map[string]string) bool {
	d, err := time.ParseDuration(annotations[olm.BundleUnpackMinRetryIntervalAnnotation])
	return err == nil && d > 0
}

// PlanFailure is how the catalog-operator recorded that an InstallPlan failed unpacking a bundle:
// the failed bundle lookup (Path set), or the plan's Installed=False condition.
type PlanFailure struct {
	// Path is the bundle image of a lookup with BundleLookupFailed=True; "" for the condition.
	Path                  string
	Type, Reason, Message string
}

// PlanUnpackFailure reports whether a Failed InstallPlan failed on a bundle unpack, and OLM's
// record of it: a bundle lookup with BundleLookupFailed=True, or else an Installed=False condition
// whose message says the unpacking failed. OLM does not create another plan while this one stays
// Failed; before v0.43 neither does it unpack again (OLM issue #2265).
func PlanUnpackFailure(p *v1alpha1.InstallPlan) (PlanFailure, bool) {
	if p.Status.Phase != v1alpha1.InstallPlanPhaseFailed {
		return PlanFailure{}, false
	}
	for _, l := range p.Status.BundleLookups {
		for _, c := range l.Conditions {
			if c.Type == v1alpha1.BundleLookupFailed && c.Status == corev1.ConditionTrue {
				return PlanFailure{Path: l.Path, Type: c.Type, Reason: c.Reason, Message: c.Message}, true
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1alpha1.InstallPlanInstalled && c.Status == corev1.ConditionFalse && strings.HasPrefix(c.Message, v1alpha1.InstallPlanUnpackFailedPrefix) {
			return PlanFailure{Type: c.Type, Reason: c.Reason, Message: c.Message}, true
		}
	}
	return PlanFailure{}, false
}
