package csvcleanup

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// Only OLM's copies without olmguard's finalizer stay out of the reconciler's queue: a tenant's
// CSV labelled olm.copiedFrom (status.reason is OLM's alone) and any CSV holding the finalizer go
// in. Fails without the predicate's finalizer test: a copy-looking CSV holding the finalizer would
// never be released.
func TestOnlyCopiesWithoutTheFinalizerStayOutOfTheQueue(t *testing.T) {
	copied := v1alpha1.ConditionReason(olm.CopiedReason)
	for _, tc := range []struct {
		name       string
		labels     map[string]string
		reason     v1alpha1.ConditionReason
		finalizers []string
		want       bool
	}{
		{"an original", nil, "InstallSucceeded", nil, true},
		{"OLM's copy", map[string]string{olm.CopiedFromLabel: "operators"}, copied, nil, false},
		{"OLM's copy holding the finalizer", map[string]string{olm.CopiedFromLabel: "operators"}, copied, []string{olmguard.CleanupFinalizer}, true},
		{"a tenant's CSV labelled as a copy", map[string]string{olm.CopiedFromLabel: "operators"}, "InstallSucceeded", nil, true},
		{"a CSV without status", nil, "", nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "op.v1", Labels: tc.labels, Finalizers: tc.finalizers},
				Status: v1alpha1.ClusterServiceVersionStatus{Phase: "Succeeded", Reason: tc.reason}}
			if got := mayNeedWork(c); got != tc.want {
				t.Errorf("mayNeedWork = %v, want %v", got, tc.want)
			}
			// The cache's stub of a copy decides as the copy does.
			if got := mayNeedWork(csvFields(c.DeepCopy())); got != tc.want {
				t.Errorf("mayNeedWork(cached) = %v, want %v", got, tc.want)
			}
		})
	}
}

// The transform runs twice on a listed copy (the page's, then the informer's): the second pass
// keeps the stub the first made. Fails without the check: a second stub for every copy.
func TestCopyStubIsMadeOnce(t *testing.T) {
	c := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "op.v1",
		Annotations: map[string]string{olm.OperatorNamespaceAnnotation: "operators", "alm-examples": "[]"}},
		Spec:   v1alpha1.ClusterServiceVersionSpec{DisplayName: "Op", InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}},
		Status: v1alpha1.ClusterServiceVersionStatus{Phase: "Succeeded", Reason: olm.CopiedReason}}
	stub := csvFields(c)
	if stub == c {
		t.Fatal("a copy was cached whole")
	}
	if again := csvFields(stub); again != stub {
		t.Error("the second pass made another stub")
	}
	s := stub.(*v1alpha1.ClusterServiceVersion)
	if len(s.Annotations) != 1 || s.Status.Reason != olm.CopiedReason || s.Name != "op.v1" {
		t.Errorf("stub: %+v", s)
	}
}
