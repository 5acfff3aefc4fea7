// Package cachepeek reads the objects in controller-runtime's cache themselves: pointers into the
// informers' stores, with no copy. A List from the cache, even without deep copies, copies every
// object's struct into the list (480 bytes a Subscription); on a cluster of 2,000 namespaces the
// readers that run for every object of the initial list or every audit turned that into tens of
// MB (docs/performance.md, "Fourth round" and "Fifth round"). The objects are shared with the
// cache: a caller reads them and never writes them.
package cachepeek

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// indexed is the part of client-go's shared informer, under controller-runtime's, that holds the
// objects.
type indexed interface{ GetIndexer() toolscache.Indexer }

// Object is a pointer to T that is a client.Object.
type Object[T any] interface {
	*T
	client.Object
}

// indexer returns the store of the cache's informer for T once that informer has synced, and an
// error if ctx ends first: a store still listing would pass for a cluster without those objects.
func indexer[T any, PT Object[T]](ctx context.Context, informers cache.Informers) (toolscache.Indexer, error) {
	inf, err := informers.GetInformer(ctx, PT(new(T)))
	if err != nil {
		return nil, err
	}
	if !inf.HasSynced() { // GetInformer returns without waiting while the cache is not started
		return nil, fmt.Errorf("the cache's informer for %T has not synced", PT(nil))
	}
	ix, ok := inf.(indexed)
	if !ok {
		return nil, fmt.Errorf("the cache's informer for %T (%T) holds no indexer", PT(nil), inf)
	}
	return ix.GetIndexer(), nil
}

// List returns the objects of kind T the cache holds in namespace ("": all).
func List[T any, PT Object[T]](ctx context.Context, informers cache.Informers, namespace string) ([]*T, error) {
	ix, err := indexer[T, PT](ctx, informers)
	if err != nil {
		return nil, err
	}
	var objs []any
	if namespace == "" {
		objs = ix.List()
	} else if objs, err = ix.ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
		return nil, err
	}
	out := make([]*T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(PT); ok {
			out = append(out, t)
		}
	}
	return out, nil
}

// Get returns the object of kind T the cache holds under key, nil when it holds none.
func Get[T any, PT Object[T]](ctx context.Context, informers cache.Informers, key client.ObjectKey) (*T, error) {
	ix, err := indexer[T, PT](ctx, informers)
	if err != nil {
		return nil, err
	}
	o, found, err := ix.GetByKey(toolscache.ObjectName{Namespace: key.Namespace, Name: key.Name}.String())
	if err != nil || !found {
		return nil, err
	}
	t, _ := o.(PT)
	return t, nil
}
