// Package cachepeektest holds objects as controller-runtime's cache does, for tests of what reads
// it through cachepeek: in client-go indexers, one per kind, indexed by namespace.
package cachepeektest

import (
	"context"
	"fmt"
	"testing"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Informers serves an indexer per Go type of the objects given to New. Unsynced makes every
// informer report that it has not synced; Gets counts GetInformer calls.
type Informers struct {
	cache.Informers
	byKind   map[string]toolscache.Indexer
	Unsynced bool
	Gets     int
}

// New holds objs, each in the indexer of its Go type.
func New(tb testing.TB, objs ...client.Object) *Informers {
	f := &Informers{byKind: map[string]toolscache.Indexer{}}
	for _, o := range objs {
		kind := fmt.Sprintf("%T", o)
		if f.byKind[kind] == nil {
			f.byKind[kind] = toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc,
				toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
		}
		if err := f.byKind[kind].Add(o); err != nil {
			tb.Fatal(err)
		}
	}
	return f
}

type informer struct {
	cache.Informer
	indexer toolscache.Indexer
	synced  bool
}

func (i informer) GetIndexer() toolscache.Indexer { return i.indexer }
func (i informer) HasSynced() bool                { return i.synced }

// GetInformer returns the informer of obj's kind; a kind New was given no object of is an error,
// as a kind the cache may not hold.
func (f *Informers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	f.Gets++
	ix, ok := f.byKind[fmt.Sprintf("%T", obj)]
	if !ok {
		return nil, fmt.Errorf("%T is not cached", obj)
	}
	return informer{indexer: ix, synced: !f.Unsynced}, nil
}
