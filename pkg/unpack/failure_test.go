package unpack

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// TestFailed is the failed-Job rule the unpack-jobs reconciler's retry and doctor's
// UnpackJobFailed check share.
func TestFailed(t *testing.T) {
	cond := func(typ batchv1.JobConditionType, status corev1.ConditionStatus, reason string) batchv1.JobCondition {
		return batchv1.JobCondition{Type: typ, Status: status, Reason: reason}
	}
	for _, tc := range []struct {
		name       string
		conditions []batchv1.JobCondition
		wantReason string
		want       bool
	}{
		{"no conditions", nil, "", false},
		{"complete", []batchv1.JobCondition{cond(batchv1.JobComplete, corev1.ConditionTrue, "")}, "", false},
		{"failed", []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonDeadlineExceeded)}, batchv1.JobReasonDeadlineExceeded, true},
		{"failed false", []batchv1.JobCondition{cond(batchv1.JobFailed, corev1.ConditionFalse, "x")}, "", false},
		{"failed after another condition", []batchv1.JobCondition{cond(batchv1.JobSuspended, corev1.ConditionTrue, "x"),
			cond(batchv1.JobFailed, corev1.ConditionTrue, batchv1.JobReasonBackoffLimitExceeded)}, batchv1.JobReasonBackoffLimitExceeded, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := Failed(&batchv1.Job{Status: batchv1.JobStatus{Conditions: tc.conditions}})
			if ok != tc.want || c.Reason != tc.wantReason {
				t.Errorf("Failed = %+v, %v; want reason %q, %v", c, ok, tc.wantReason, tc.want)
			}
		})
	}
}

func TestPlanUnpackFailure(t *testing.T) {
	lookup := func(typ string, status corev1.ConditionStatus) v1alpha1.BundleLookup {
		return v1alpha1.BundleLookup{Path: "quay.io/x/bundle:v1", Conditions: []v1alpha1.BundleLookupCondition{
			{Type: typ, Status: status, Reason: "JobFailed", Message: "unpack job failed"}}}
	}
	installed := func(status corev1.ConditionStatus, message string) v1alpha1.InstallPlanCondition {
		return v1alpha1.InstallPlanCondition{Type: v1alpha1.InstallPlanInstalled, Status: status, Reason: "InstallCheckFailed", Message: message}
	}
	plan := func(phase v1alpha1.InstallPlanPhase, lookups []v1alpha1.BundleLookup, conds ...v1alpha1.InstallPlanCondition) *v1alpha1.InstallPlan {
		return &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Status: v1alpha1.InstallPlanStatus{Phase: phase, BundleLookups: lookups, Conditions: conds}}
	}
	for _, tc := range []struct {
		name string
		plan *v1alpha1.InstallPlan
		want PlanFailure
		ok   bool
	}{
		{"failed lookup", plan(v1alpha1.InstallPlanPhaseFailed, []v1alpha1.BundleLookup{lookup(v1alpha1.BundleLookupFailed, corev1.ConditionTrue)}),
			PlanFailure{Path: "quay.io/x/bundle:v1", Type: v1alpha1.BundleLookupFailed, Reason: "JobFailed", Message: "unpack job failed"}, true},
		{"lookup only pending", plan(v1alpha1.InstallPlanPhaseFailed, []v1alpha1.BundleLookup{lookup(v1alpha1.BundleLookupPending, corev1.ConditionTrue)}),
			PlanFailure{}, false},
		{"installed false on unpacking", plan(v1alpha1.InstallPlanPhaseFailed, nil, installed(corev1.ConditionFalse, "bundle unpacking failed: timeout")),
			PlanFailure{Type: v1alpha1.InstallPlanInstalled, Reason: "InstallCheckFailed", Message: "bundle unpacking failed: timeout"}, true},
		{"installed false on something else", plan(v1alpha1.InstallPlanPhaseFailed, nil, installed(corev1.ConditionFalse, "error creating csv")),
			PlanFailure{}, false},
		{"not failed", plan(v1alpha1.InstallPlanPhaseInstalling, []v1alpha1.BundleLookup{lookup(v1alpha1.BundleLookupFailed, corev1.ConditionTrue)}),
			PlanFailure{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, ok := PlanUnpackFailure(tc.plan); got != tc.want || ok != tc.ok {
				t.Errorf("PlanUnpackFailure = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
