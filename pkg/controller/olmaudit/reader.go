package olmaudit

import (
	"context"

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
		{Object: &v1alpha1.Subscription{}, Fields: cacheneeds.TypedView},
		{Object: &v1alpha1.InstallPlan{}, Fields: cacheneeds.InstallPlanView},
	}
}

// cachedReader lists Subscriptions and InstallPlans from the cache, without copying them (the
// audit only reads what it lists: doctor.Audit writes nothing of a listed object), and reads
// everything else live.
type cachedReader struct {
	client.Reader // live
	Cache         client.Reader
}

func (r cachedReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *v1alpha1.SubscriptionList, *v1alpha1.InstallPlanList:
		o := (&client.ListOptions{}).ApplyOptions(opts)
		if o.LabelSelector == nil && o.FieldSelector == nil {
			// One whole list: the cache has no pages (it refuses a continue token), and a page
			// limit would only cut the list short.
			if err := r.Cache.List(ctx, list, client.InNamespace(o.Namespace), client.UnsafeDisableDeepCopy); err != nil {
				return err
			}
			// controller-runtime's cache marks every list "continue-not-supported": a pager that
			// followed it would read the cache again without end.
			list.SetContinue("")
			return nil
		}
	}
	return r.Reader.List(ctx, list, opts...)
}
