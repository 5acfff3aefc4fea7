package catalogpods

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/builders"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// fixture is a fake cluster with node a NotReady for a minute (b and c Ready), a CatalogSource
// "cat" in each namespace, and pods of it on node a: pods[ns] names.
func fixture(t *testing.T, pods map[string]int) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	down := builders.Node("a", "z1", corev1.ConditionUnknown, t0.Add(-time.Minute))
	objs := []client.Object{&down}
	for _, n := range []string{"b", "c"} {
		up := builders.Node(n, "z2", corev1.ConditionTrue, t0.Add(-time.Hour))
		objs = append(objs, &up)
	}
	for ns, n := range pods {
		objs = append(objs, &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cat", UID: builders.CatalogSourceUID}})
		for i := range n {
			p := builders.CatalogPod("a", nil)
			p.Namespace, p.Name, p.UID = ns, fmt.Sprintf("p%d", i), types.UID(fmt.Sprintf("%s-p%d", ns, i))
			objs = append(objs, p)
		}
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
}

func reconcileAt(t *testing.T, r *Reconciler, ns, name string) reconcile.Result {
	t.Helper()
	res, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	if err != nil {
		t.Fatalf("%s/%s: %v", ns, name, err)
	}
	return res
}

func exists(t *testing.T, c client.Client, ns, name string) bool {
	t.Helper()
	err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &corev1.Pod{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

// At most N deletions per minute: past the burst, stranded pods wait their turn.
func TestReconcileRateLimited(t *testing.T) {
	c := fixture(t, map[string]int{"olm": 2})
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(10), Grace: 30 * time.Second,
		Limiter: NewLimiter(1, 1), Now: func() time.Time { return t0 }}
	if res := reconcileAt(t, r, "olm", "p0"); res.RequeueAfter != 0 {
		t.Fatalf("first: %+v", res)
	}
	if res := reconcileAt(t, r, "olm", "p1"); res.RequeueAfter < 30*time.Second {
		t.Fatalf("second within the minute: %+v, want a requeue of about a minute", res)
	}
	if exists(t, c, "olm", "p0") || !exists(t, c, "olm", "p1") {
		t.Error("want p0 deleted and p1 kept past the rate limit")
	}
}

// One namespace's stranded pods cannot use up the budget: a tenant with twelve pods of its own
// CatalogSource on the dead node, reconciled first, leaves room for the OLM namespace's catalog.
// Fails before the fix: with one bucket for all namespaces (the limiter before the fix is
// NewLimiter(10, 10) here), the tenant's first ten pods take the whole minute's budget and the
// OLM namespace's pod waits a minute behind them.
func TestReconcileRateLimitedPerNamespace(t *testing.T) {
	c := fixture(t, map[string]int{"tenant": 12, "olm": 1})
	o := DefaultOptions()
	r := &Reconciler{Client: c, Recorder: events.NewFakeRecorder(100), Grace: o.Grace,
		Limiter: NewLimiter(o.DeletionsPerMinute, o.DeletionsPerMinutePerNamespace), Now: func() time.Time { return t0 }}
	deleted := 0
	for i := range 12 {
		if res := reconcileAt(t, r, "tenant", fmt.Sprintf("p%d", i)); res.RequeueAfter == 0 {
			deleted++
		}
	}
	if deleted != o.DeletionsPerMinutePerNamespace {
		t.Errorf("tenant: %d pods deleted in the first minute, want %d", deleted, o.DeletionsPerMinutePerNamespace)
	}
	if res := reconcileAt(t, r, "olm", "p0"); res.RequeueAfter != 0 || exists(t, c, "olm", "p0") {
		t.Fatalf("the OLM namespace's catalog pod waits behind the tenant's (%+v)", res)
	}
}

// The buckets, step by step on a fake clock: 10 a minute in all, 3 in one namespace.
func TestLimiter(t *testing.T) {
	l := NewLimiter(10, 3)
	take := func(ns string, at time.Time) bool { return l.Take(ns, at) == 0 }
	for i := range 3 {
		if !take("tenant", t0) {
			t.Fatalf("tenant's deletion %d refused within its 3", i+1)
		}
	}
	// Refused: it says when to come back (one token every 20 s), and takes nothing from the
	// cluster's bucket however often it asks.
	if d := l.Take("tenant", t0); d != 20*time.Second {
		t.Fatalf("tenant's 4th: wait %s, want 20s", d)
	}
	for range 100 {
		take("tenant", t0)
	}
	// Two more namespaces take their 3 each: 9 of 10 used.
	for _, ns := range []string{"olm", "team-b"} {
		for i := range 3 {
			if !take(ns, t0) {
				t.Fatalf("%s's deletion %d refused", ns, i+1)
			}
		}
	}
	if !take("team-c", t0) {
		t.Fatal("the 10th deletion of the minute refused")
	}
	if d := l.Take("team-d", t0); d != 6*time.Second {
		t.Fatalf("11th in the minute: wait %s, want 6s (the cluster's bucket refills every 6s)", d)
	}
	// 20 s later: the cluster's bucket holds 3 tokens again, the tenant's 1.
	later := t0.Add(20 * time.Second)
	// One take after another: each call spends a token.
	if first, second := take("tenant", later), take("tenant", later); !first || second {
		t.Error("20 s later, want exactly one more deletion for the tenant")
	}
	if first, second := take("team-d", later), take("team-d", later); !first || !second {
		t.Error("20 s later, want two more deletions for another namespace")
	}
	if take("team-e", later) {
		t.Error("the cluster's bucket, empty again, allowed a deletion")
	}
	// A minute on, all buckets are full again and forgotten once a deletion happens.
	if !take("olm", t0.Add(2*time.Minute)) {
		t.Fatal("refused after two minutes")
	}
	if n := len(l.perNS); n != 1 {
		t.Errorf("%d namespace buckets kept, want 1 (olm's, just used)", n)
	}
}
