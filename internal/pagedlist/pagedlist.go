// Package pagedlist makes an informer's list a bounded read: consistent pages of a fixed size,
// each trimmed by the informer's transform before the next is read.
//
// client-go's reflector gathers every page of its list into one list of whole objects before the
// informer's transform runs, and a list at resourceVersion "0" is answered whole from the
// apiserver's watch cache, whatever the limit. On a cluster where OLM copied an AllNamespaces
// operator's CSV into 2,000 namespaces, with a 40 KB alm-examples each, that is the controller's
// peak: every copy decoded whole at once. A watch-list stream (client-go's WatchListClient)
// avoids it where the apiserver offers one; this keeps the bound the same on every apiserver
// (docs/performance.md, "A cluster of 2,000 namespaces").
package pagedlist

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// NewInformer returns a constructor for controller-runtime's cache.Options.NewInformer whose
// informers list pageSize objects at a time (0: client-go's own list or watch-list stream).
func NewInformer(pageSize int64) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if pageSize <= 0 {
			return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
		}
		paged := &ListerWatcher{inner: toolscache.ToListerWatcherWithContext(lw), pageSize: pageSize}
		return &informer{SharedIndexInformer: toolscache.NewSharedIndexInformer(paged, obj, resync, indexers), lw: paged}
	}
}

// informer hands the transform controller-runtime sets to its paged list as well.
type informer struct {
	toolscache.SharedIndexInformer
	lw *ListerWatcher
}

func (i *informer) SetTransform(t toolscache.TransformFunc) error {
	i.lw.SetTransform(t)
	return i.SharedIndexInformer.SetTransform(t)
}

// ListerWatcher lists in consistent pages and trims each page; watches pass through.
type ListerWatcher struct {
	inner    toolscache.ListerWatcherWithContext
	pageSize int64

	mu        sync.Mutex
	transform toolscache.TransformFunc
	// slots, when set, is a semaphore each page is read and trimmed under: a process that bounds
	// how many pages of large objects it decodes at once shares it with other readers.
	slots chan struct{}
}

// New wraps lw: its lists read pageSize objects at a time.
func New(lw toolscache.ListerWatcher, pageSize int64) *ListerWatcher {
	return &ListerWatcher{inner: toolscache.ToListerWatcherWithContext(lw), pageSize: pageSize}
}

// WithSlots makes every page be read and trimmed while holding one of slots.
func (p *ListerWatcher) WithSlots(slots chan struct{}) *ListerWatcher {
	p.slots = slots
	return p
}

// SetTransform sets what each listed object is trimmed to before the next page is read. The
// informer applies it again when storing: transforms are idempotent.
func (p *ListerWatcher) SetTransform(t toolscache.TransformFunc) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.transform = t
}

// IsWatchListSemanticsUnSupported keeps the reflector on the paged list: a stream's bound depends
// on the apiserver's features, the list's does not.
func (p *ListerWatcher) IsWatchListSemanticsUnSupported() bool { return true }

func (p *ListerWatcher) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

func (p *ListerWatcher) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(context.Background(), opts)
}

func (p *ListerWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(ctx, opts)
}

// ListWithContext reads every page consistently (no resourceVersion: "0" would make the
// apiserver ignore the limit; the continue token keeps later pages at the first page's snapshot)
// and returns every trimmed object at the snapshot's resourceVersion, as a metav1.List of the
// objects themselves: the reflector takes them as they are, where a typed list would be copied
// twice more (into its Items, then out of them one allocation each).
func (p *ListerWatcher) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	p.mu.Lock()
	transform := p.transform
	p.mu.Unlock()
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.Continue = "", "", ""
	opts.Limit = p.pageSize
	out := &metav1.List{}
	for {
		next, rv, err := p.page(ctx, opts, transform, out)
		if err != nil {
			return nil, err
		}
		if next == "" {
			out.ResourceVersion = rv
			return out, nil
		}
		opts.Continue = next
	}
}

// page reads one page (holding a slot when there are slots), appends its trimmed objects to out
// and returns its continue token and resourceVersion.
func (p *ListerWatcher) page(ctx context.Context, opts metav1.ListOptions, transform toolscache.TransformFunc, out *metav1.List) (string, string, error) {
	if p.slots != nil {
		select {
		case p.slots <- struct{}{}:
			defer func() { <-p.slots }()
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
	}
	page, err := p.inner.ListWithContext(ctx, opts)
	if err != nil {
		return "", "", err
	}
	// Each object in an allocation of its own: pointers into the page's Items would keep the
	// whole array alive, with the spare capacity its decoding grew it by.
	objs, err := meta.ExtractListWithAlloc(page)
	if err != nil {
		return "", "", fmt.Errorf("reading a page of %T: %w", page, err)
	}
	for _, o := range objs {
		if transform != nil {
			t, err := transform(o)
			if err != nil {
				return "", "", err
			}
			if o, _ = t.(runtime.Object); o == nil {
				return "", "", fmt.Errorf("the cache's transform returned %T, not an object", t)
			}
		}
		out.Items = append(out.Items, runtime.RawExtension{Object: o})
	}
	lm, err := meta.ListAccessor(page)
	if err != nil {
		return "", "", err
	}
	return lm.GetContinue(), lm.GetResourceVersion(), nil
}
