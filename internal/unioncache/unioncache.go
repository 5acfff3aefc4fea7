// Package unioncache caches a kind as the union of two label selections, each served by an
// informer of its own, and reads it as one: a cache.Cache whose Get, List and informers see both.
//
// A label selector cannot express "not labelled X, or labelled both X and Y". The controller needs
// exactly that for CSVs: OLM's copies of an AllNamespaces operator (label olm.copiedFrom) must
// never reach its cache (on a cluster of 2,000 namespaces they are 20,000 objects of 40 KB and
// more), yet a CSV someone else labelled olm.copiedFrom that holds olmguard's finalizer must still
// be cleaned up when deleted (docs/performance.md, "A cluster of 2,000 namespaces").
//
// Each object is in at most one selection at a time (the selections are disjoint), so Get asks
// the primary cache first and the other one on NotFound, List concatenates, and an informer's
// handlers receive the events of both. An object that moves from one selection to the other is
// deleted from one store and added to the other, in either order: handlers that only enqueue a
// key and read the cache again (controller-runtime's) see it in whichever store holds it.
package unioncache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// NewCacheFunc returns a constructor for manager.Options.NewCache: the cache the options describe,
// plus, for each object of also, a second cache of that kind with the options' transform, informer
// constructor and scheme but also's selection. also's selections must be disjoint from the
// options' ByObject selection of the same kind: an object in both would be listed twice.
func NewCacheFunc(also map[client.Object]cache.ByObject) cache.NewCacheFunc {
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		primary, err := cache.New(cfg, opts)
		if err != nil {
			return nil, err
		}
		if len(also) == 0 {
			return primary, nil
		}
		u := &Cache{Cache: primary, scheme: opts.Scheme, also: map[schema.GroupVersionKind]cache.Cache{}}
		for obj, by := range also {
			gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
			if err != nil {
				return nil, err
			}
			o := opts
			o.ByObject = map[client.Object]cache.ByObject{obj: by}
			second, err := cache.New(cfg, o)
			if err != nil {
				return nil, fmt.Errorf("the second cache of %s: %w", gvk.Kind, err)
			}
			u.also[gvk] = second
		}
		return u, nil
	}
}

// Cache is a primary cache and, for some kinds, a second cache of another selection of that kind.
type Cache struct {
	cache.Cache
	scheme *runtime.Scheme
	also   map[schema.GroupVersionKind]cache.Cache
}

// second is the other cache of obj's kind, nil when it has none. Lists name their item kind.
func (c *Cache) second(obj runtime.Object) cache.Cache {
	gvk, err := apiutil.GVKForObject(obj, c.scheme)
	if err != nil {
		return nil
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	return c.also[gvk]
}

// Get reads the primary cache, and the second one when the primary does not hold the object.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := c.Cache.Get(ctx, key, obj, opts...)
	if s := c.second(obj); s != nil && apierrors.IsNotFound(err) {
		return s.Get(ctx, key, obj, opts...)
	}
	return err
}

// List lists both caches into list, the primary's objects first.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := c.Cache.List(ctx, list, opts...); err != nil {
		return err
	}
	s := c.second(list)
	if s == nil {
		return nil
	}
	more, ok := reflect.New(reflect.TypeOf(list).Elem()).Interface().(client.ObjectList)
	if !ok {
		return fmt.Errorf("listing %T: not a list", list)
	}
	more.GetObjectKind().SetGroupVersionKind(list.GetObjectKind().GroupVersionKind())
	if err := s.List(ctx, more, opts...); err != nil {
		return err
	}
	items, err := meta.ExtractList(more)
	if err != nil || len(items) == 0 {
		return err
	}
	first, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	return meta.SetList(list, append(first, items...))
}

// GetInformer returns the informer of obj's kind; for a kind with a second cache, one whose
// handlers receive the events of both.
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	get := func(from cache.Cache) (cache.Informer, error) { return from.GetInformer(ctx, obj, opts...) }
	return unite(get, c.Cache, c.second(obj))
}

// GetInformerForKind is GetInformer by kind.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	get := func(from cache.Cache) (cache.Informer, error) { return from.GetInformerForKind(ctx, gvk, opts...) }
	return unite(get, c.Cache, c.also[gvk])
}

// unite gets the informer of primary, and of second when there is one, as one informer.
func unite(get func(cache.Cache) (cache.Informer, error), primary, second cache.Cache) (cache.Informer, error) {
	i, err := get(primary)
	if err != nil || second == nil {
		return i, err
	}
	j, err := get(second)
	if err != nil {
		return nil, err
	}
	return union{i, j}, nil
}

// RemoveInformer removes the kind's informers from both caches.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	err := c.Cache.RemoveInformer(ctx, obj)
	if s := c.second(obj); s != nil {
		err = errors.Join(err, s.RemoveInformer(ctx, obj))
	}
	return err
}

// IndexField indexes both caches.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if err := c.Cache.IndexField(ctx, obj, field, extract); err != nil {
		return err
	}
	if s := c.second(obj); s != nil {
		return s.IndexField(ctx, obj, field, extract)
	}
	return nil
}

// Start runs every cache until ctx ends.
func (c *Cache) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(c.also))
	for _, s := range c.also {
		go func() { errs <- s.Start(ctx) }()
	}
	err := c.Cache.Start(ctx)
	cancel()
	for range c.also {
		err = errors.Join(err, <-errs)
	}
	return err
}

// WaitForCacheSync waits for every cache.
func (c *Cache) WaitForCacheSync(ctx context.Context) bool {
	if !c.Cache.WaitForCacheSync(ctx) {
		return false
	}
	for _, s := range c.also {
		if !s.WaitForCacheSync(ctx) {
			return false
		}
	}
	return true
}

// union is the informers of a kind's two selections as one: a handler added is added to both.
type union [2]cache.Informer

func (u union) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return u.add(func(i cache.Informer) (toolscache.ResourceEventHandlerRegistration, error) {
		return i.AddEventHandler(h)
	})
}

func (u union) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return u.add(func(i cache.Informer) (toolscache.ResourceEventHandlerRegistration, error) {
		return i.AddEventHandlerWithResyncPeriod(h, resync)
	})
}

func (u union) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return u.add(func(i cache.Informer) (toolscache.ResourceEventHandlerRegistration, error) {
		return i.AddEventHandlerWithOptions(h, o)
	})
}

func (u union) add(f func(cache.Informer) (toolscache.ResourceEventHandlerRegistration, error)) (toolscache.ResourceEventHandlerRegistration, error) {
	var regs registrations
	for _, i := range u {
		r, err := f(i)
		if err != nil {
			for k, done := range regs {
				_ = u[k].RemoveEventHandler(done)
			}
			return nil, err
		}
		regs = append(regs, r)
	}
	return regs, nil
}

func (u union) RemoveEventHandler(h toolscache.ResourceEventHandlerRegistration) error {
	regs, ok := h.(registrations)
	if !ok || len(regs) != len(u) {
		return fmt.Errorf("unioncache: a registration of another informer (%T)", h)
	}
	return errors.Join(u[0].RemoveEventHandler(regs[0]), u[1].RemoveEventHandler(regs[1]))
}

func (u union) AddIndexers(ix toolscache.Indexers) error {
	return errors.Join(u[0].AddIndexers(ix), u[1].AddIndexers(ix))
}

func (u union) HasSynced() bool { return u[0].HasSynced() && u[1].HasSynced() }

func (u union) HasSyncedChecker() toolscache.DoneChecker {
	return allDone(u[0].HasSyncedChecker(), u[1].HasSyncedChecker())
}

func (u union) IsStopped() bool { return u[0].IsStopped() || u[1].IsStopped() }

// registrations is one handler's registration with each informer of a union.
type registrations []toolscache.ResourceEventHandlerRegistration

func (r registrations) HasSynced() bool {
	for _, x := range r {
		if !x.HasSynced() {
			return false
		}
	}
	return true
}

func (r registrations) HasSyncedChecker() toolscache.DoneChecker {
	cs := make([]toolscache.DoneChecker, len(r))
	for i, x := range r {
		cs[i] = x.HasSyncedChecker()
	}
	return allDone(cs...)
}

// done is done when all of its checkers are.
type done struct {
	checkers []toolscache.DoneChecker
	once     sync.Once
	ch       chan struct{}
}

func allDone(cs ...toolscache.DoneChecker) *done { return &done{checkers: cs, ch: make(chan struct{})} }

func (d *done) Name() string {
	names := make([]string, len(d.checkers))
	for i, c := range d.checkers {
		names[i] = c.Name()
	}
	return strings.Join(names, " and ")
}

func (d *done) Done() <-chan struct{} {
	d.once.Do(func() {
		go func() {
			for _, c := range d.checkers {
				<-c.Done()
			}
			close(d.ch)
		}()
	})
	return d.ch
}
