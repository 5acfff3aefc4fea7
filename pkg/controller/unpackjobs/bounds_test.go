package unpackjobs

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// pagingReader serves Subscription Lists from the reader it wraps as the apiserver does: at most
// Limit a response, with a continue token while more are left, and all at once without a limit.
// It records each request's limit and the largest response.
type pagingReader struct {
	client.Reader
	limits  []int64
	largest int
}

func (r *pagingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	subs, ok := list.(*v1alpha1.SubscriptionList)
	if !ok {
		return r.Reader.List(ctx, list, opts...)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	all := &v1alpha1.SubscriptionList{}
	if err := r.Reader.List(ctx, all, client.InNamespace(o.Namespace)); err != nil {
		return err
	}
	start := 0
	if o.Continue != "" {
		start, _ = strconv.Atoi(o.Continue)
	}
	end := len(all.Items)
	if o.Limit > 0 && start+int(o.Limit) < end {
		end = start + int(o.Limit)
	}
	r.limits = append(r.limits, o.Limit)
	r.largest = max(r.largest, end-start)
	subs.Items, subs.Continue = all.Items[start:end], ""
	if end < len(all.Items) {
		subs.Continue = strconv.Itoa(end)
	}
	return nil
}

// The unpack retry's Subscription list, cluster-wide, is read 10 to a page (a tenant decides the
// number and the size of Subscriptions), and only the waiting ones are kept, trimmed: all 60
// waiting on the catalog are found among 120.
//
// Fails before the fix: one List with no limit returned all 120 Subscriptions in one response,
// and the waiting ones were kept whole (conditions and all).
func TestWaitingSubscriptionsReadInPages(t *testing.T) {
	big := strings.Repeat("x", 16<<10)
	var objs []client.Object
	for i := range 120 {
		s := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", i%7), Name: fmt.Sprintf("sub-%d", i)},
			Spec: v1alpha1.SubscriptionSpec{CatalogSource: "cat", CatalogSourceNamespace: "olm", Package: fmt.Sprintf("pkg-%d", i)},
			Status: v1alpha1.SubscriptionStatus{Conditions: []v1alpha1.SubscriptionCondition{
				{Type: v1alpha1.SubscriptionBundleUnpackFailed, Status: corev1.ConditionTrue, Message: big}}}}
		if i%2 == 1 {
			s.Spec.CatalogSource = "other"
		}
		objs = append(objs, s)
	}
	r, c := reconciler(t, objs...)
	pr := &pagingReader{Reader: c}
	r.Reader = pr
	waiting, err := r.waitingSubscriptions(context.Background(), "olm", "cat")
	if err != nil {
		t.Fatal(err)
	}
	if len(waiting) != 60 {
		t.Errorf("%d waiting Subscriptions, want 60", len(waiting))
	}
	if pr.largest > subscriptionPageSizeWant {
		t.Errorf("a response held %d Subscriptions, want at most %d", pr.largest, subscriptionPageSizeWant)
	}
	for i, l := range pr.limits {
		if l <= 0 || l > subscriptionPageSizeWant {
			t.Errorf("request %d limit %d, want 1 to %d", i, l, subscriptionPageSizeWant)
		}
	}
	for _, s := range waiting {
		if len(s.Status.Conditions) > 0 || s.Name == "" || s.Namespace == "" || s.Spec.CatalogSource != "cat" {
			t.Fatalf("waiting Subscription %+v: want a trimmed view with its name, namespace and catalog", s.ObjectMeta)
		}
	}
}

// subscriptionPageSizeWant is the page the test allows (the fix reads 10).
const subscriptionPageSizeWant = 10
