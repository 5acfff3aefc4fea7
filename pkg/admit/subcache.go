package admit

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// The webhook's Subscription cache. A decision that needs Subscriptions' spec and status (the
// duplicate-package, mixed-approval and approval policies, F1 on an update) cannot read a
// namespace of large Subscriptions whole within its lookup budget: 200 of 1 MiB are 200 MiB. The
// webhook therefore watches Subscriptions and keeps of each only its trimmed view
// (TrimSubscription) with its resourceVersion; a lookup still reads the namespace consistently,
// as metadata, and takes from the cache each Subscription whose resourceVersion matches, reading
// only the others whole (LiveSubscriptions.Cache).

// DefaultCachePageSize is how many Subscriptions one page of the cache's list holds: the cache
// decodes one page of whole objects at a time (the apiserver's largest are 1.5 MiB in etcd).
const DefaultCachePageSize = 10

// TrimSubscription is the cache's transform: a Subscription becomes its trimmed view
// (SubscriptionView) with its resourceVersion, which a lookup compares with the consistent
// list's. Anything else (a tombstone of a deletion) passes unchanged.
func TrimSubscription(obj any) (any, error) {
	s, ok := obj.(*v1alpha1.Subscription)
	if !ok {
		return obj, nil
	}
	v := SubscriptionView(s)
	v.ResourceVersion = s.ResourceVersion
	return &v, nil
}

// WithSubscriptionCache sets the webhook cache's options for Subscriptions: the trimming
// transform and the paged list (NewInformer).
func WithSubscriptionCache(o cache.Options) cache.Options {
	o.NewInformer = NewInformer
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&v1alpha1.Subscription{}] = cache.ByObject{Transform: TrimSubscription}
	return o
}

// NewInformer is the webhook cache's informer constructor (cache.Options.NewInformer): for
// Subscriptions, its initial list and every relist read pages of DefaultCachePageSize and trim
// each page before the next, so at most one page of whole objects is decoded at once. client-go
// otherwise gathers every page of a list into one before the transform runs, and a list at
// resourceVersion "0" is answered whole from the watch cache whatever the limit. Other kinds get
// client-go's informer unchanged.
func NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	if _, ok := obj.(*v1alpha1.Subscription); ok {
		lw = &pagedSubscriptions{inner: toolscache.ToListerWatcherWithContext(lw), pageSize: DefaultCachePageSize}
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}

// pagedSubscriptions lists Subscriptions a page at a time, trimming each page, and watches as
// its inner ListerWatcher does.
type pagedSubscriptions struct {
	inner    toolscache.ListerWatcherWithContext
	pageSize int64
}

// IsWatchListSemanticsUnSupported keeps the reflector on the paged list below rather than a
// watch-list stream: the stream's bound depends on the apiserver's features, the list's does not.
func (p *pagedSubscriptions) IsWatchListSemanticsUnSupported() bool { return true }

func (p *pagedSubscriptions) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

func (p *pagedSubscriptions) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(context.Background(), opts)
}

func (p *pagedSubscriptions) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return p.inner.WatchWithContext(ctx, opts)
}

// ListWithContext reads every page consistently (no resourceVersion: "0" would make the
// apiserver ignore the limit; the continue token keeps later pages at the first one's snapshot)
// and returns one list of trimmed Subscriptions at that snapshot's resourceVersion.
func (p *pagedSubscriptions) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	opts.ResourceVersion, opts.ResourceVersionMatch, opts.Continue = "", "", ""
	opts.Limit = p.pageSize
	out := &v1alpha1.SubscriptionList{}
	for {
		next, err := p.page(ctx, opts, out)
		if err != nil {
			return nil, err
		}
		if next == "" {
			return out, nil
		}
		opts.Continue = next
	}
}

// page reads one page, holding a page slot as a lookup does, and appends its trimmed items.
func (p *pagedSubscriptions) page(ctx context.Context, opts metav1.ListOptions, out *v1alpha1.SubscriptionList) (string, error) {
	select {
	case pageSlots <- struct{}{}:
		defer func() { <-pageSlots }()
	case <-ctx.Done():
		return "", ctx.Err()
	}
	obj, err := p.inner.ListWithContext(ctx, opts)
	if err != nil {
		return "", err
	}
	list, ok := obj.(*v1alpha1.SubscriptionList)
	if !ok {
		return "", fmt.Errorf("listing Subscriptions returned %T", obj)
	}
	for i := range list.Items {
		v, _ := TrimSubscription(&list.Items[i])
		out.Items = append(out.Items, *v.(*v1alpha1.Subscription))
	}
	out.ResourceVersion = list.ResourceVersion
	return list.Continue, nil
}
