package catalogpods

import (
	"context"
	"testing"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/scenario"
)

// At most N deletions per minute: past the burst, stranded pods wait their turn.
func TestReconcileRateLimited(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	down := scenario.Node("a", "z1", corev1.ConditionUnknown, now.Add(-(time.Minute)))
	objs := []client.Object{&down}
	for _, n := range []string{"b", "c"} {
		up := scenario.Node(n, "z2", corev1.ConditionTrue, now.Add(-(time.Hour)))
		objs = append(objs, &up)
	}
	for _, name := range []string{"p1", "p2"} {
		p := scenario.CatalogPod("a", nil)
		p.Name, p.UID = name, types.UID("uid-"+name)
		objs = append(objs, p)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Grace: 30 * time.Second,
		Limiter: rate.NewLimiter(rate.Limit(1.0/60), 1), Now: func() time.Time { return now }}
	ctx := context.Background()
	req := func(n string) reconcile.Request {
		return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "olm", Name: n}}
	}
	if res, err := r.Reconcile(ctx, req("p1")); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("first: %+v %v", res, err)
	}
	res, err := r.Reconcile(ctx, req("p2"))
	if err != nil || res.RequeueAfter < 30*time.Second {
		t.Fatalf("second within the minute: %+v %v, want a requeue of about a minute", res, err)
	}
	if err := c.Get(ctx, req("p1").NamespacedName, &corev1.Pod{}); !apierrors.IsNotFound(err) {
		t.Errorf("p1 not deleted: %v", err)
	}
	if err := c.Get(ctx, req("p2").NamespacedName, &corev1.Pod{}); err != nil {
		t.Errorf("p2 deleted past the rate limit: %v", err)
	}
}
