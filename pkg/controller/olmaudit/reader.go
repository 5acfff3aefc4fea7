package olmaudit

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// CacheNeeds is what the audit reads through the manager's cache: Subscriptions and InstallPlans,
// as installplan-owners and subscription-drift read them. Those reconcilers hold every one of
// them anyway; listing them live again every interval (20,000 of each on a cluster of 2,000
// namespaces) added 40 to 50 MiB to the controller's peak (docs/performance.md, "A cluster of
// 2,000 namespaces"). Every other kind the audit reads live, a page at a time.
func CacheNeeds() cacheneeds.Needs {
	return cacheneeds.Needs{
		{Object: &v1alpha1.Subscription{}, Fields: cacheneeds.SubscriptionView},
		{Object: &v1alpha1.InstallPlan{}, Fields: cacheneeds.InstallPlanView},
	}
}

// cacheObjects gives the audit the manager's cached Subscriptions and InstallPlans themselves
// (doctor.Options.Shared): pointers to the objects in the informers' stores, which the audit reads
// and never writes. A List from the cache, even without deep copies, copies each object's struct
// into the list's items: with 20,000 of each kind, 19 MB more at the controller's peak
// (docs/performance.md, "Fourth round").
type cacheObjects struct{ Informers cache.Informers }

func (c cacheObjects) Subscriptions(ctx context.Context, namespace string) ([]*v1alpha1.Subscription, error) {
	return cached[v1alpha1.Subscription](ctx, c.Informers, namespace)
}

func (c cacheObjects) InstallPlans(ctx context.Context, namespace string) ([]*v1alpha1.InstallPlan, error) {
	return cached[v1alpha1.InstallPlan](ctx, c.Informers, namespace)
}

// indexed is the part of client-go's shared informer, under controller-runtime's, that holds the
// objects.
type indexed interface{ GetIndexer() toolscache.Indexer }

// cached returns the objects of kind T the cache holds in namespace ("": all), once its informer
// has synced.
func cached[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, informers cache.Informers, namespace string) ([]*T, error) {
	inf, err := informers.GetInformer(ctx, PT(new(T)))
	if err != nil {
		return nil, err
	}
	ix, ok := inf.(indexed)
	if !ok {
		return nil, fmt.Errorf("the cache's informer for %T (%T) holds no indexer", PT(nil), inf)
	}
	var objs []any
	if namespace == "" {
		objs = ix.GetIndexer().List()
	} else if objs, err = ix.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace); err != nil {
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
