package operatorgroups

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deleted = metav1.NewTime(t0)
)

func meta(name string, created time.Duration, deleting bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(t0.Add(created))}
	if deleting {
		m.DeletionTimestamp = &deleted
	}
	return m
}

func TestLiveNames(t *testing.T) {
	for _, tc := range []struct {
		name   string
		groups []metav1.ObjectMeta
		skip   string
		want   []string
	}{
		{"none", nil, "", nil},
		{"sorted by name", []metav1.ObjectMeta{meta("b", 0, false), meta("a", time.Hour, false)}, "", []string{"a", "b"}},
		{"being deleted: not counted", []metav1.ObjectMeta{meta("a", 0, true), meta("b", 0, false)}, "", []string{"b"}},
		{"the one being written is skipped", []metav1.ObjectMeta{meta("new", 0, false), meta("old", 0, false)}, "new", []string{"old"}},
		{"only itself", []metav1.ObjectMeta{meta("new", 0, false)}, "new", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LiveNames(tc.groups, tc.skip); !slices.Equal(got, tc.want) {
				t.Errorf("LiveNames = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOldestFirst(t *testing.T) {
	og := func(name string, created time.Duration, deleting bool) olmv1.OperatorGroup {
		return olmv1.OperatorGroup{ObjectMeta: meta(name, created, deleting)}
	}
	for _, tc := range []struct {
		name   string
		groups []olmv1.OperatorGroup
		want   []string
	}{
		{"none", nil, []string{}},
		{"oldest first", []olmv1.OperatorGroup{og("a", time.Hour, false), og("b", 0, false)}, []string{"b", "a"}},
		{"same second: by name", []olmv1.OperatorGroup{og("z", 0, false), og("m", 0, false), og("a", time.Hour, false)}, []string{"m", "z", "a"}},
		{"being deleted: left out", []olmv1.OperatorGroup{og("old", 0, true), og("new", time.Hour, false)}, []string{"new"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OldestFirst(tc.groups); !slices.Equal(got, tc.want) {
				t.Errorf("OldestFirst = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCounts(t *testing.T) {
	for _, tc := range []struct {
		live             int
		tooMany, missing bool
	}{
		{0, false, true},
		{1, false, false},
		{2, true, false},
		{3, true, false},
	} {
		if TooMany(tc.live) != tc.tooMany || Missing(tc.live) != tc.missing {
			t.Errorf("%d live: TooMany %v, Missing %v; want %v, %v", tc.live, TooMany(tc.live), Missing(tc.live), tc.tooMany, tc.missing)
		}
	}
}

func TestCSVFailure(t *testing.T) {
	for _, tc := range []struct {
		name   string
		phase  v1alpha1.ClusterServiceVersionPhase
		reason v1alpha1.ConditionReason
		want   v1alpha1.ConditionReason
		ok     bool
	}{
		{"too many", v1alpha1.CSVPhaseFailed, v1alpha1.CSVReasonTooManyOperatorGroups, v1alpha1.CSVReasonTooManyOperatorGroups, true},
		{"none", v1alpha1.CSVPhaseFailed, v1alpha1.CSVReasonNoOperatorGroup, v1alpha1.CSVReasonNoOperatorGroup, true},
		{"other failure", v1alpha1.CSVPhaseFailed, "InstallCheckFailed", "", false},
		{"not failed", v1alpha1.CSVPhasePending, v1alpha1.CSVReasonNoOperatorGroup, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.ClusterServiceVersion{Status: v1alpha1.ClusterServiceVersionStatus{Phase: tc.phase, Reason: tc.reason}}
			if got, ok := CSVFailure(c); got != tc.want || ok != tc.ok {
				t.Errorf("CSVFailure = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
