package admit

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/pagedlist"
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
		// Each page holds a page slot, as a lookup does (pageSlots).
		paged := pagedlist.New(lw, DefaultCachePageSize).WithSlots(pageSlots)
		paged.SetTransform(TrimSubscription)
		lw = paged
	}
	return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
}
