package csvcleanup

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// A cleanup that cannot finish within --cleanup-timeout releases its finalizer with a Warning
// Event, and only its own finalizer: nothing is stuck forever.
func TestCleanupTimeoutReleasesFinalizer(t *testing.T) {
	deleted := metav1.NewTime(time.Now().Add(-11 * time.Minute))
	csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: "op.v1", Namespace: "ns", DeletionTimestamp: &deleted,
		Finalizers: []string{olm.CSVCleanupFinalizer, olmguard.CleanupFinalizer}}}
	r, c := fakeReconciler(cleanup.OperandCleanupAlways, csv)
	rec := r.Recorder.(*events.FakeRecorder)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "op.v1"}}); err != nil {
		t.Fatal(err)
	}
	got := &v1alpha1.ClusterServiceVersion{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: "op.v1"}, got); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(got.Finalizers, olmguard.CleanupFinalizer) || !slices.Contains(got.Finalizers, olm.CSVCleanupFinalizer) {
		t.Fatalf("finalizers %v: want olmguard's released and OLM's kept", got.Finalizers)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning CleanupTimedOut") {
			t.Fatalf("first event %q, want a Warning CleanupTimedOut", e)
		}
	default:
		t.Fatal("no event")
	}
}

// fakeReconciler is a Reconciler over a fake client holding objs, with a 10 minute timeout.
func fakeReconciler(mode cleanup.OperandCleanup, objs ...client.Object) (*Reconciler, client.Client) {
	s := runtime.NewScheme()
	_ = v1alpha1.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return &Reconciler{Client: c, Reader: c, Recorder: events.NewFakeRecorder(10), OperandCleanup: mode, Timeout: 10 * time.Minute, Now: time.Now}, c
}
