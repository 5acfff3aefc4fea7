package csvcleanup_test

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// behindCache is the manager's cache as a busy apiserver leaves it: reads are real, but its
// Subscription list is what seen makes of the apiserver's (one the user deleted still there, or
// one just written not there yet).
type behindCache struct {
	client.Client
	seen func([]v1alpha1.Subscription) []v1alpha1.Subscription
}

func (b behindCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := b.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if subs, ok := list.(*v1alpha1.SubscriptionList); ok {
		subs.Items = b.seen(subs.Items)
	}
	return nil
}

// cleanupThroughCache deletes an opted-in CSV that OLM installed a CRD for, with one operand, and
// runs csv-cleanup on it through cache, reading the apiserver through reader, until it releases
// its finalizer. It reports whether the operand is gone. Nothing else reconciles here: each poll
// runs the reconciler once, as its queue would.
func cleanupThroughCache(t *testing.T, c client.Client, csv *v1alpha1.ClusterServiceVersion, cache func(client.Client) client.Client, reader client.Reader) bool {
	t.Helper()
	ctx := context.Background()
	createCRDPlan(t, c, csv.Namespace, csv.Name, "widgets.example.com") // OLM installed the CRD for it
	operand := createWidget(t, c, csv.Namespace, "data")
	r := &csvcleanup.Reconciler{
		Client:         cache(c),
		Reader:         reader,
		Recorder:       events.NewFakeRecorder(100),
		OperandCleanup: cleanup.OperandCleanupOptIn,
		Timeout:        time.Hour,
		Now:            time.Now,
	}
	if err := c.Delete(ctx, csv); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the CSV's cleanup done and its finalizer released", func(ctx context.Context) (bool, error) {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(csv)}); err != nil {
			return false, err
		}
		return gone(ctx, c, csv)
	})
	ok, err := gone(ctx, c, operand)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestUninstallSeenThroughAStaleCache: a user deletes the Subscription, then the CSV, and the
// controller's cache still holds the Subscription, which names the CSV. Before the live check the
// reconciler took the uninstall for a Recreate and kept the operands of a CSV that opted in to their
// cleanup (seen in the real-OLM tier under load: TestF3Uninstall, "left its operand"). Now it reads
// the Subscriptions that name the CSV from the apiserver, and the operand goes.
func TestUninstallSeenThroughAStaleCache(t *testing.T) {
	c := testenv.Shared(t).Client
	createWidgetCRD(t, c)
	ns := namespace(t, c, "stale")
	csv := createCSV(t, c, ns, "op.v1", "", true)
	deleted := v1alpha1.Subscription{}
	deleted.Namespace, deleted.Name, deleted.UID = ns, "op", "deleted-a-moment-ago"
	deleted.Status.CurrentCSV, deleted.Status.InstalledCSV = csv.Name, csv.Name
	stale := func(c client.Client) client.Client {
		return behindCache{Client: c, seen: func(subs []v1alpha1.Subscription) []v1alpha1.Subscription { return append(subs, deleted) }}
	}
	if !cleanupThroughCache(t, c, csv, stale, c) {
		t.Error("the operand of a CSV that opted in to cleanup survived its uninstall: the cached, deleted Subscription made it a Recreate")
	}
}

// TestRecreateSeenThroughALaggingCache: the reverse. The apiserver holds a Subscription that names
// the deleted CSV, which OLM will create again, and the controller's cache has not seen it yet.
// Without the live check before operands go, the reconciler took the recreate for an uninstall
// and deleted the operands of a CSV that opted in to their cleanup; now they stay, and the
// finalizer is released.
func TestRecreateSeenThroughALaggingCache(t *testing.T) {
	c := testenv.Shared(t).Client
	ctx := context.Background()
	createWidgetCRD(t, c)
	ns := namespace(t, c, "lagging")
	csv := createCSV(t, c, ns, "op.v1", "", true)
	// Subscriptions of the namespace beyond one page, the one naming the CSV last by name.
	for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "zz-op"} {
		sub := &v1alpha1.Subscription{}
		sub.Namespace, sub.Name = ns, name
		sub.Spec.Package, sub.Spec.CatalogSource, sub.Spec.CatalogSourceNamespace = name, "cat", ns
		if err := c.Create(ctx, sub); err != nil {
			t.Fatal(err)
		}
		if name == "zz-op" {
			sub.Status.CurrentCSV, sub.Status.InstalledCSV = csv.Name, csv.Name
			sub.Status.LastUpdated = metav1.Now()
			if err := c.Status().Update(ctx, sub); err != nil {
				t.Fatal(err)
			}
		}
	}
	lagging := func(c client.Client) client.Client {
		return behindCache{Client: c, seen: func([]v1alpha1.Subscription) []v1alpha1.Subscription { return nil }}
	}
	reads := &subscriptionPages{Reader: c}
	if cleanupThroughCache(t, c, csv, lagging, reads) {
		t.Error("the operand of a CSV a Subscription will create again was deleted: the lagging cache made it an Uninstall")
	}
	// A tenant decides how large its Subscriptions are: they are read from the apiserver 10 at a
	// time, whatever the namespace holds (12 here).
	if len(reads.limits) < 2 || slices.ContainsFunc(reads.limits, func(l int64) bool { return l <= 0 || l > 10 }) {
		t.Errorf("Subscriptions read from the apiserver in pages of %v, want pages of at most 10 (two or more here)", reads.limits)
	}
}

// subscriptionPages records the page size of each Subscription list read through it.
type subscriptionPages struct {
	client.Reader
	limits []int64
}

func (p *subscriptionPages) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.SubscriptionList); ok {
		o := &client.ListOptions{}
		o.ApplyOptions(opts)
		p.limits = append(p.limits, o.Limit)
	}
	return p.Reader.List(ctx, list, opts...)
}
