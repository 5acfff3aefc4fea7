package unpackjobs

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// catalog is the CatalogSource olm/cat that configMap(name, true) names as its owner.
var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func catalog(uid types.UID) *v1alpha1.CatalogSource {
	return &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: "cat", UID: uid}}
}

func reconciler(t *testing.T, objs ...client.Object) (*Reconciler, client.Client) {
	t.Helper()
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	_ = batchv1.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	return &Reconciler{Client: c, Reader: c, Recorder: events.NewFakeRecorder(10), TTL: 10 * time.Minute, Now: func() time.Time { return now }}, c
}

func configMap(name string, olms bool) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "olm", UID: types.UID("uid-" + name)}}
	if olms {
		cm.Labels = map[string]string{olm.ManagedLabel: "true"}
		cm.OwnerReferences = []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: "cat", UID: "c"}}
	}
	return cm
}

func ownedJob(cm string, labels map[string]string, finished bool) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: "olm", Labels: labels}}
	if finished {
		done := metav1.NewTime(now.Add(-time.Minute))
		j.Status.CompletionTime = &done
		j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: done}}
	}
	j.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm, UID: types.UID("uid-" + cm)}}
	return j
}

func TestReconcileLabelsRunningInvisibleJob(t *testing.T) {
	j := ownedJob("cm", map[string]string{"team": "x"}, false)
	r, c := reconciler(t, catalog("c"), configMap("cm", true), j)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "olm", Name: "cm"}}); err != nil {
		t.Fatal(err)
	}
	got := &batchv1.Job{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(j), got); err != nil {
		t.Fatalf("a running Job must never be deleted: %v", err)
	}
	want := map[string]string{"team": "x", olm.ManagedLabel: "true", olm.BundleUnpackRefLabel: "cm"}
	for k, v := range want {
		if got.Labels[k] != v {
			t.Errorf("labels = %v, want %v", got.Labels, want)
		}
	}
}

func TestReconcileDeletesFinishedInvisibleJobOnly(t *testing.T) {
	ours, foreign := ownedJob("cm", nil, true), ownedJob("other", nil, true)
	r, c := reconciler(t, catalog("c"), configMap("cm", true), configMap("other", false), ours, foreign)
	for _, n := range []string{"cm", "other"} {
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "olm", Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(ours), &batchv1.Job{}); !apierrors.IsNotFound(err) {
		t.Errorf("finished Job OLM cannot see was not deleted: %v", err)
	}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(foreign), &batchv1.Job{}); err != nil {
		t.Errorf("a Job owned by a ConfigMap that is not OLM's was touched: %v", err)
	}
	for _, n := range []string{"cm", "other"} {
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "olm", Name: n}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("ConfigMap %s must never be deleted: %v", n, err)
		}
	}
}

// A tenant's look-alike: an OLM-labelled ConfigMap naming a CatalogSource that is not there (or is
// another object of that name) owns Jobs olmguard neither labels nor deletes.
func TestReconcileIgnoresJobsWithoutLiveCatalogSource(t *testing.T) {
	for name, objs := range map[string][]client.Object{
		"no CatalogSource":        nil,
		"CatalogSource recreated": {catalog("another-uid")},
	} {
		t.Run(name, func(t *testing.T) {
			running, finished := ownedJob("cm", nil, false), ownedJob("done", nil, true)
			r, c := reconciler(t, append(objs, configMap("cm", true), configMap("done", true), running, finished)...)
			for _, n := range []string{"cm", "done"} {
				if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "olm", Name: n}}); err != nil {
					t.Fatal(err)
				}
			}
			got := &batchv1.Job{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(running), got); err != nil || len(got.Labels) != 0 {
				t.Errorf("running look-alike Job: labels %v (err %v), want untouched", got.Labels, err)
			}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(finished), got); err != nil {
				t.Errorf("finished look-alike Job deleted: %v", err)
			}
		})
	}
}

// A tenant's Job whose ownerReference names OLM's unpack ConfigMap but not its UID (or names it
// in another group) is not OLM's: olmguard neither labels nor deletes it, nor nudges anyone.
// Fails before the fix: the Job was found by the owner's name alone, and the finished forgery
// deleted (issue 31, item 1).
func TestReconcileIgnoresJobsForgingTheOwner(t *testing.T) {
	for name, ref := range map[string]metav1.OwnerReference{
		"another UID":   {APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "forged"},
		"another group": {APIVersion: "evil.example.com/v1", Kind: "ConfigMap", Name: "cm", UID: "uid-cm"},
	} {
		t.Run(name, func(t *testing.T) {
			running, finished := ownedJob("running", nil, false), ownedJob("finished", nil, true)
			running.OwnerReferences = []metav1.OwnerReference{ref}
			finished.OwnerReferences = []metav1.OwnerReference{ref}
			r, c := reconciler(t, catalog("c"), configMap("cm", true), running, finished)
			for _, n := range []string{"running", "finished"} {
				if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "olm", Name: n}}); err != nil {
					t.Fatal(err)
				}
			}
			got := &batchv1.Job{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(running), got); err != nil || len(got.Labels) != 0 {
				t.Errorf("running forged Job: labels %v (err %v), want untouched", got.Labels, err)
			}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(finished), got); err != nil {
				t.Errorf("finished forged Job deleted: %v", err)
			}
		})
	}
}

// After deleting a Job OLM could not see, the Subscriptions to its catalog that may be waiting on
// the bundle are nudged, so that OLM resolves their namespaces again without its back-off.
func TestReconcileNudgesSubscriptionsAfterDeletingInvisibleJob(t *testing.T) {
	sub := func(ns, catalog string, state v1alpha1.SubscriptionState) *v1alpha1.Subscription {
		s := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
			Spec: v1alpha1.SubscriptionSpec{CatalogSource: catalog, CatalogSourceNamespace: "olm"}}
		s.Status.State = state
		return s
	}
	stuck, installed, other := sub("stuck", "cat", ""), sub("installed", "cat", v1alpha1.SubscriptionStateAtLatest), sub("other", "elsewhere", "")
	r, c := reconciler(t, catalog("c"), configMap("cm", true), ownedJob("cm", nil, true), stuck, installed, other)
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "olm", Name: "cm"}}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		sub    *v1alpha1.Subscription
		nudged bool
	}{{stuck, true}, {installed, false}, {other, false}} {
		got := &v1alpha1.Subscription{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(tt.sub), got); err != nil {
			t.Fatal(err)
		}
		if _, nudged := got.Annotations[olmguard.ResyncAnnotation]; nudged != tt.nudged {
			t.Errorf("Subscription in %s: nudged = %v, want %v", tt.sub.Namespace, nudged, tt.nudged)
		}
	}
}
