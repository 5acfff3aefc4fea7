package unpack

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/olmguard/olmguard/pkg/olm"
)

// failedJob is a labelled unpack Job that failed with reason ago.
func failedJob(reason string, ago time.Duration, ttl *int32) *batchv1.Job {
	j := job(true, true, 0, ttl)
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: reason,
		LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
	return j
}

func TestDecideRetry(t *testing.T) {
	const after = 2 * time.Minute
	empty := &corev1.ConfigMap{}
	full := &corev1.ConfigMap{Data: map[string]string{"csv.yaml": "x"}}
	deadline := failedJob(batchv1.JobReasonDeadlineExceeded, time.Hour, nil)
	unlabelled := failedJob(batchv1.JobReasonDeadlineExceeded, time.Hour, nil)
	unlabelled.Labels = nil
	tests := []struct {
		name string
		u    FailedUnpack
		want RetryDecision
	}{
		{"running", FailedUnpack{Job: job(true, true, 0, nil), ConfigMap: empty}, RetryDecision{Reason: "NotFailed"}},
		{"complete", FailedUnpack{Job: job(true, true, time.Hour, nil), ConfigMap: empty}, RetryDecision{Reason: "NotFailed"}},
		{"deadline exceeded, empty ConfigMap", FailedUnpack{Job: deadline, ConfigMap: empty},
			RetryDecision{Retry: true, DeleteConfigMap: true, Reason: "FailedDeadlineExceeded"}},
		{"backoff limit exceeded", FailedUnpack{Job: failedJob(batchv1.JobReasonBackoffLimitExceeded, time.Hour, nil), ConfigMap: empty},
			RetryDecision{Retry: true, DeleteConfigMap: true, Reason: "FailedBackoffLimitExceeded"}},
		{"ConfigMap holds a bundle: kept", FailedUnpack{Job: deadline, ConfigMap: full},
			RetryDecision{Retry: true, Reason: "FailedDeadlineExceeded"}},
		{"binary data counts as a bundle", FailedUnpack{Job: deadline, ConfigMap: &corev1.ConfigMap{BinaryData: map[string][]byte{"b": nil}}},
			RetryDecision{Retry: true, Reason: "FailedDeadlineExceeded"}},
		{"other failure reason", FailedUnpack{Job: failedJob("PodFailurePolicy", time.Hour, nil), ConfigMap: empty},
			RetryDecision{Reason: "FailureNotRetriable"}},
		{"without OLM's labels", FailedUnpack{Job: unlabelled, ConfigMap: empty}, RetryDecision{Reason: "NotAnOLMUnpackJob"}},
		{"OLM v0.43+ TTL", FailedUnpack{Job: failedJob(batchv1.JobReasonDeadlineExceeded, time.Hour, ptr.To[int32](300)), ConfigMap: empty},
			RetryDecision{Reason: "OLMRetriesAfterTTL"}},
		{"olmguard's own TTL", FailedUnpack{Job: failedJob(batchv1.JobReasonDeadlineExceeded, time.Hour, ptr.To[int32](600)), ConfigMap: empty},
			RetryDecision{Retry: true, DeleteConfigMap: true, Reason: "FailedDeadlineExceeded"}},
		{"OLM retry annotation", FailedUnpack{Job: deadline, ConfigMap: empty, OLMRetries: true}, RetryDecision{Reason: "OLMRetryAnnotation"}},
		{"another Job running", FailedUnpack{Job: deadline, ConfigMap: empty, Others: []batchv1.Job{*job(true, true, 0, nil)}},
			RetryDecision{Reason: "OtherUnpackJob"}},
		{"another Job complete", FailedUnpack{Job: deadline, ConfigMap: empty, Others: []batchv1.Job{*job(true, true, time.Minute, nil)}},
			RetryDecision{Reason: "OtherUnpackJob"}},
		{"other Jobs failed too", FailedUnpack{Job: deadline, ConfigMap: empty, Others: []batchv1.Job{*failedJob(batchv1.JobReasonDeadlineExceeded, 2*time.Hour, nil)}},
			RetryDecision{Retry: true, DeleteConfigMap: true, Reason: "FailedDeadlineExceeded"}},
		{"failed recently", FailedUnpack{Job: failedJob(batchv1.JobReasonDeadlineExceeded, 30*time.Second, nil), ConfigMap: empty},
			RetryDecision{Reason: "FailedRecently", RequeueAfter: 90 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := DecideRetry(tt.u, now, after); got != tt.want {
				t.Errorf("DecideRetry = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestOLMRetryInterval(t *testing.T) {
	for v, want := range map[string]bool{"": false, "10m": true, "0": false, "0s": false, "-1m": false, "soon": false} {
		a := map[string]string{}
		if v != "" {
			a[olm.BundleUnpackMinRetryIntervalAnnotation] = v
		}
		if got := OLMRetryInterval(a); got != want {
			t.Errorf("OLMRetryInterval(%q) = %v, want %v", v, got, want)
		}
	}
}
