package csvcleanup

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// CSVs written while the webhook was away get the finalizer from the controller; copies and
// opted-out CSVs never do, and OLM's finalizer stays where it is.
func TestBackfill(t *testing.T) {
	plain := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Finalizers: []string{olm.CSVCleanupFinalizer}}}
	bare := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}}
	copied := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "t", Labels: map[string]string{olm.CopiedFromLabel: "ns"}}}
	optedOut := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "ns",
		Annotations: map[string]string{olmguard.CleanupAnnotation: olmguard.CleanupDisabled}}}
	r, c := fakeReconciler(cleanup.OperandCleanupOptIn, plain, bare, copied, optedOut)
	want := map[string][]string{
		"ns/a": {olm.CSVCleanupFinalizer, olmguard.CleanupFinalizer},
		"ns/b": {olmguard.CleanupFinalizer},
		"t/c":  nil,
		"ns/d": nil,
	}
	for key, fins := range want {
		nn := types.NamespacedName{Namespace: key[:len(key)-2], Name: key[len(key)-1:]}
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: nn}); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.ClusterServiceVersion{}
		if err := c.Get(context.Background(), nn, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.Finalizers, fins) {
			t.Errorf("%s: finalizers %v, want %v", key, got.Finalizers, fins)
		}
	}
}
