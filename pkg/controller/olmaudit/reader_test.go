package olmaudit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// fakeCache answers as controller-runtime's cache does: a whole list, marked
// "continue-not-supported", a continue token refused, and the cached objects themselves under
// UnsafeDisableDeepCopy (shallow copies of them in the list's items).
type fakeCache struct {
	client.Reader
	subs  []*v1alpha1.Subscription
	plans []*v1alpha1.InstallPlan
	lists int
}

func (c *fakeCache) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	if o.Continue != "" {
		return errors.New("continue list option is not supported by the cache")
	}
	if c.lists++; c.lists > 10 {
		return errors.New("listed the cache more than ten times")
	}
	if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
		return errors.New("the audit copied the cache")
	}
	switch l := list.(type) {
	case *v1alpha1.SubscriptionList:
		for _, s := range c.subs {
			l.Items = append(l.Items, *s)
		}
	case *v1alpha1.InstallPlanList:
		for _, p := range c.plans {
			l.Items = append(l.Items, *p)
		}
	default:
		return fmt.Errorf("%T is not cached", list)
	}
	list.SetContinue("continue-not-supported")
	return nil
}

// liveReader lists nothing of the other kinds, and fails the kinds the cache serves.
type liveReader struct{ client.Reader }

func (liveReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch list.(type) {
	case *v1alpha1.SubscriptionList, *v1alpha1.InstallPlanList:
		return fmt.Errorf("%T read live", list)
	}
	return nil
}

func (liveReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
}

// TestAuditReadsSubscriptionsAndPlansFromTheCache: the controller's audit takes Subscriptions and
// InstallPlans from the manager's cache, once each, without copying them and without writing
// them. Fails before the cachedReader: both were listed live (40 to 50 MiB more at the
// controller's peak on a cluster of 2,000 namespaces); fails without resetting the cache's
// continue mark: the pager read the cache again and again (3.5 GB in a minute on that cluster).
func TestAuditReadsSubscriptionsAndPlansFromTheCache(t *testing.T) {
	yes := true
	cache := &fakeCache{}
	for i := range 3 {
		ns := fmt.Sprintf("team-%d", i)
		cache.subs = append(cache.subs, &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sub", UID: "s-uid",
			Annotations: map[string]string{"olmguard.io/resync": "1"}},
			Spec:   v1alpha1.SubscriptionSpec{Package: "pkg", CatalogSource: "cat", CatalogSourceNamespace: "olm"},
			Status: v1alpha1.SubscriptionStatus{State: "AtLatestKnown", InstallPlanRef: &corev1.ObjectReference{Name: "plan"}}})
		cache.plans = append(cache.plans, &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plan", UID: "p-uid",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "operators.coreos.com/v1alpha1", Kind: "Subscription", Name: "sub", UID: "s-uid", Controller: &yes}}},
			Status: v1alpha1.InstallPlanStatus{Phase: "Complete", Plan: []*v1alpha1.Step{{Resolving: "pkg.v1", Status: "Created"}}}})
	}
	before := &fakeCache{}
	for _, s := range cache.subs {
		before.subs = append(before.subs, s.DeepCopy())
	}
	for _, p := range cache.plans {
		before.plans = append(before.plans, p.DeepCopy())
	}

	o := auditOptions()
	o.Recheck = 0
	report, err := doctor.Audit(context.Background(), cachedReader{Reader: liveReader{}, Cache: cache}, o)
	if err != nil {
		t.Fatal(err)
	}
	if cache.lists != 2 || report.Checked["Subscriptions"] != 3 || report.Checked["InstallPlans"] != 3 {
		t.Errorf("cache listed %d times, checked %v; want 2 lists and 3 of each", cache.lists, report.Checked)
	}
	for i := range cache.subs {
		if !equality.Semantic.DeepEqual(cache.subs[i], before.subs[i]) || !equality.Semantic.DeepEqual(cache.plans[i], before.plans[i]) {
			t.Errorf("the audit wrote cached objects of namespace %s", cache.subs[i].Namespace)
		}
	}
}
