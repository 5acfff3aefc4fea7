package olmaudit

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/cachepeek"
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
	return cachepeek.List[v1alpha1.Subscription](ctx, c.Informers, namespace)
}

func (c cacheObjects) InstallPlans(ctx context.Context, namespace string) ([]*v1alpha1.InstallPlan, error) {
	return cachepeek.List[v1alpha1.InstallPlan](ctx, c.Informers, namespace)
}
