package unpack

import (
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func job(labelled, managed bool, finishedAgo time.Duration, ttl *int32) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "j", Labels: map[string]string{}}, Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl}}
	if labelled {
		j.Labels[olm.BundleUnpackRefLabel] = "cm"
	}
	if managed {
		j.Labels[olm.ManagedLabel] = "true"
	}
	if finishedAgo > 0 {
		t := metav1.NewTime(now.Add(-finishedAgo))
		j.Status.CompletionTime = &t
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: t}}
	}
	return j
}

func TestDecide(t *testing.T) {
	const ttl = 10 * time.Minute
	failed := job(false, true, 0, nil)
	failed.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}}
	tests := []struct {
		name string
		job  *batchv1.Job
		want Decision
	}{
		{"finished, no unpack label (#3210): delete", job(false, true, time.Minute, nil), Decision{Action: Delete, Reason: "FinishedJobInvisibleToOLM"}},
		{"failed, no unpack label: delete", failed, Decision{Action: Delete, Reason: "FinishedJobInvisibleToOLM"}},
		{"finished, no olm.managed: delete", job(true, false, time.Minute, nil), Decision{Action: Delete, Reason: "FinishedJobInvisibleToOLM"}},
		{"running, invisible: label, never delete", job(false, false, 0, nil), Decision{Action: Label, Reason: "RunningJobInvisibleToOLM"}},
		{"running, visible: nothing", job(true, true, 0, nil), Decision{}},
		{"finished with a TTL: the TTL controller's", job(true, true, time.Hour, ptr.To[int32](300)), Decision{}},
		{"finished without a TTL, within it: wait", job(true, true, 4*time.Minute, nil), Decision{Reason: "WithinTTL", RequeueAfter: 6 * time.Minute}},
		{"finished without a TTL, past it: delete", job(true, true, 11*time.Minute, nil), Decision{Action: Delete, Reason: "FinishedWithoutTTL"}},
	}
	for _, tt := range tests {
		if got := Decide(tt.job, now, ttl); got != tt.want {
			t.Errorf("%s: Decide = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func TestWaitingSubscriptions(t *testing.T) {
	sub := func(name, catalogNS, catalog string, state v1alpha1.SubscriptionState, deleting bool) v1alpha1.Subscription {
		s := v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1alpha1.SubscriptionSpec{CatalogSource: catalog, CatalogSourceNamespace: catalogNS}}
		s.Status.State = state
		if deleting {
			s.DeletionTimestamp = &metav1.Time{}
		}
		return s
	}
	subs := []v1alpha1.Subscription{
		sub("new", "olm", "cat", "", false),
		sub("upgrading", "olm", "cat", v1alpha1.SubscriptionStateUpgradePending, false),
		sub("installed", "olm", "cat", v1alpha1.SubscriptionStateAtLatest, false),
		sub("other-catalog", "olm", "other", "", false),
		sub("same-name-elsewhere", "tenant", "cat", "", false),
		sub("going", "olm", "cat", "", true),
	}
	var got []string
	for _, s := range WaitingSubscriptions(subs, "olm", "cat") {
		got = append(got, s.Name)
	}
	if want := []string{"new", "upgrading"}; !slices.Equal(got, want) {
		t.Errorf("WaitingSubscriptions = %v, want %v", got, want)
	}
}
