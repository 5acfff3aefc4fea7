package cachepeek

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/cachepeek/cachepeektest"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

func sub(ns, name string) *v1alpha1.Subscription {
	return &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}

// List and Get hand out the cache's own objects, by namespace and by key.
func TestListAndGetReturnTheCachedObjects(t *testing.T) {
	a, b, c := sub("ns1", "a"), sub("ns1", "b"), sub("ns2", "c")
	informers := cachepeektest.New(t, a, b, c)
	ctx := context.Background()

	got, err := List[v1alpha1.Subscription](ctx, informers, "ns1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || (got[0] != a && got[0] != b) || (got[1] != a && got[1] != b) || got[0] == got[1] {
		t.Errorf("List(ns1) = %v, want the cached a and b themselves", got)
	}
	if all, err := List[v1alpha1.Subscription](ctx, informers, ""); err != nil || len(all) != 3 {
		t.Errorf("List(all) = %d objects, %v; want 3", len(all), err)
	}
	if o, err := Get[v1alpha1.Subscription](ctx, informers, client.ObjectKey{Namespace: "ns2", Name: "c"}); err != nil || o != c {
		t.Errorf("Get(ns2/c) = %p, %v; want the cached c (%p)", o, err, c)
	}
	if o, err := Get[v1alpha1.Subscription](ctx, informers, client.ObjectKey{Namespace: "ns1", Name: "c"}); err != nil || o != nil {
		t.Errorf("Get(ns1/c) = %v, %v; want nil, no error", o, err)
	}
}

// An informer that has not synced is an error, not an empty store: a reader deciding that nothing
// needs work from a store still listing would skip work.
func TestUnsyncedInformerIsAnError(t *testing.T) {
	informers := cachepeektest.New(t, sub("ns", "a"))
	informers.Unsynced = true
	if _, err := List[v1alpha1.Subscription](context.Background(), informers, "ns"); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Errorf("List: err = %v, want one saying the informer has not synced", err)
	}
	if _, err := Get[v1alpha1.Subscription](context.Background(), informers, client.ObjectKey{Namespace: "ns", Name: "a"}); err == nil {
		t.Error("Get: no error from an informer that has not synced")
	}
}

// An informer without client-go's indexer is an error naming it, not an empty result.
func TestInformerWithoutIndexerIsAnError(t *testing.T) {
	_, err := List[v1alpha1.Subscription](context.Background(), noIndexer{}, "")
	if err == nil || !strings.Contains(err.Error(), "holds no indexer") {
		t.Errorf("err = %v, want one naming the missing indexer", err)
	}
}

type noIndexer struct{ cache.Informers }

type syncedOnly struct{ cache.Informer }

func (syncedOnly) HasSynced() bool { return true }

func (noIndexer) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return syncedOnly{}, nil
}
