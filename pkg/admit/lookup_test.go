package admit

import (
	"context"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// listRecorder is a client.Reader that records its Lists' options and list type.
type listRecorder struct {
	client.Reader
	opts *client.ListOptions
	list client.ObjectList
}

func (r *listRecorder) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.opts = &client.ListOptions{}
	r.opts.ApplyOptions(opts)
	r.list = list
	return nil
}

// By default the Subscriptions come from a consistent List (no resourceVersion), which sees every
// Subscription committed before it; WatchCache reads the apiserver's watch cache (resourceVersion
// "1", NotOlderThan: with "0" the apiserver would ignore the page limit). Each read is counted by
// kind. A metadata-only lookup lists metadata, the others whole Subscriptions; both in pages.
func TestLiveSubscriptionsReadOptions(t *testing.T) {
	for _, tc := range []struct {
		watchCache, metadataOnly bool
		wantRV, wantRead         string
		wantList                 client.ObjectList
	}{
		{false, true, "", ReadConsistent, &metav1.PartialObjectMetadataList{}},
		{false, false, "", ReadConsistent, &v1alpha1.SubscriptionList{}},
		{true, true, "1", ReadWatchCache, &metav1.PartialObjectMetadataList{}},
		{true, false, "1", ReadWatchCache, &v1alpha1.SubscriptionList{}},
	} {
		r := &listRecorder{}
		counter := metrics.SubscriptionReads.WithLabelValues("test-reads", tc.wantRead)
		before := testutil.ToFloat64(counter)
		if _, err := (LiveSubscriptions{Reader: r, WatchCache: tc.watchCache, Webhook: "test-reads"}).List(context.Background(), "ns", tc.metadataOnly); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(counter) - before; got != 1 {
			t.Errorf("watchCache=%v: %s reads counted %v times, want 1", tc.watchCache, tc.wantRead, got)
		}
		got := r.opts.AsListOptions()
		wantLimit := int64(DefaultSubscriptionPageSize)
		if tc.metadataOnly {
			wantLimit = DefaultMetadataPageSize
		}
		if r.opts.Namespace != "ns" || got.ResourceVersion != tc.wantRV || got.Limit != wantLimit {
			t.Errorf("watchCache=%v: namespace %q resourceVersion %q limit %d, want ns, %q and %d", tc.watchCache, r.opts.Namespace, got.ResourceVersion, got.Limit, tc.wantRV, wantLimit)
		}
		if tc.watchCache && got.ResourceVersionMatch != metav1.ResourceVersionMatchNotOlderThan {
			t.Errorf("watch-cache read with resourceVersionMatch %q, want NotOlderThan", got.ResourceVersionMatch)
		}
		if fmt.Sprintf("%T", r.list) != fmt.Sprintf("%T", tc.wantList) {
			t.Errorf("metadataOnly=%v: listed into %T, want %T", tc.metadataOnly, r.list, tc.wantList)
		}
		if m, ok := r.list.(*metav1.PartialObjectMetadataList); ok && m.GroupVersionKind() != v1alpha1.GroupVersion.WithKind("SubscriptionList") {
			t.Errorf("metadata list of %v, want Subscriptions", m.GroupVersionKind())
		}
	}
}

// Live reads each named Subscription's metadata by name: one that is missing or being deleted is
// not live, a name no Subscription can have is never sent, and more names than MaxGets are read
// from the namespace's metadata list.
func TestLiveSubscriptionsByName(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	deleting := metav1.Now()
	r := &getRecorder{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(
		&v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "uid-a"}},
		&v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gone", UID: "uid-gone", DeletionTimestamp: &deleting, Finalizers: []string{"x"}}},
		&v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "b", UID: "uid-b"}},
	).Build()}
	l := LiveSubscriptions{Reader: r, MaxGets: 4}
	live, err := l.Live(context.Background(), "ns", []string{"a", "gone", "b", "../x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live["a"] != "uid-a" {
		t.Errorf("live = %v, want only a", live)
	}
	if len(r.keys) != 3 {
		t.Errorf("read %v, want a, gone and b of ns (never ../x)", r.keys)
	}
	for _, k := range r.keys {
		if k.Namespace != "ns" {
			t.Errorf("read %v outside the asked namespace", k)
		}
	}
	// More names than MaxGets: one metadata list of the namespace decides, not one GET each, and
	// not a cap that lets the request through (the hostile tier's 202 owners dropped at once).
	r.keys = nil
	live, err = l.Live(context.Background(), "ns", []string{"a", "gone", "b", "c", "d"})
	if err != nil {
		t.Fatalf("five names with MaxGets 4: %v", err)
	}
	if len(live) != 1 || live["a"] != "uid-a" || len(r.keys) != 0 {
		t.Errorf("five names with MaxGets 4: live %v after GETs %v; want only a, from a list", live, r.keys)
	}
}
