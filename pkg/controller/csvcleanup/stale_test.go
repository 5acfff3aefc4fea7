package csvcleanup_test

import (
	"context"
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

// staleCache is the manager's cache as a busy apiserver leaves it: reads are real, but the
// Subscription list still holds a Subscription the user has already deleted.
type staleCache struct {
	client.Client
	deleted v1alpha1.Subscription
}

func (s staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := s.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if subs, ok := list.(*v1alpha1.SubscriptionList); ok {
		subs.Items = append(subs.Items, s.deleted)
	}
	return nil
}

// TestUninstallSeenThroughAStaleCache: a user deletes the Subscription, then the CSV, and the
// controller's cache still holds the Subscription, which names the CSV. Before the live check the
// reconciler took the uninstall for a Recreate and kept the operands of a CSV that opted in to their
// cleanup (seen in the real-OLM tier under load: TestF3Uninstall, "left its operand"). Now it reads
// the Subscriptions that name the CSV from the apiserver, and the operand goes.
func TestUninstallSeenThroughAStaleCache(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx := context.Background()
	createWidgetCRD(t, c)
	ns := namespace(t, c, "stale")
	csv := createCSV(t, c, ns, "op.v1", "", true)
	createCRDPlan(t, c, ns, "op.v1", "widgets.example.com") // OLM installed the CRD for it
	operand := createWidget(t, c, ns, "data")

	deleted := v1alpha1.Subscription{}
	deleted.Namespace, deleted.Name, deleted.UID = ns, "op", "deleted-a-moment-ago"
	deleted.Status.CurrentCSV, deleted.Status.InstalledCSV = csv.Name, csv.Name
	r := &csvcleanup.Reconciler{
		Client:         staleCache{Client: c, deleted: deleted},
		Reader:         c,
		Recorder:       events.NewFakeRecorder(100),
		OperandCleanup: cleanup.OperandCleanupOptIn,
		Timeout:        time.Hour,
		Now:            time.Now,
	}
	if err := c.Delete(ctx, csv); err != nil {
		t.Fatal(err)
	}
	// Nothing else reconciles here: each poll runs the reconciler once, as its queue would.
	testenv.Eventually(t, "the CSV's cleanup done and its finalizer released", func(ctx context.Context) (bool, error) {
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(csv)}); err != nil {
			return false, err
		}
		return gone(ctx, c, csv)
	})
	if ok, err := gone(ctx, c, operand); err != nil || !ok {
		t.Errorf("the operand of a CSV that opted in to cleanup survived its uninstall (gone %v, %v): the cached, deleted Subscription made it a Recreate", ok, err)
	}
}

// laggingCache is the manager's cache before it has seen a Subscription the apiserver holds: reads
// are real, but the Subscription list lacks it.
type laggingCache struct{ client.Client }

func (l laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := l.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	if subs, ok := list.(*v1alpha1.SubscriptionList); ok {
		subs.Items = nil
	}
	return nil
}

// TestRecreateSeenThroughALaggingCache: the reverse of TestUninstallSeenThroughAStaleCache. The
// apiserver holds a Subscription that names the deleted CSV, which OLM will create again, and the
// controller's cache has not seen it yet. Without the live check before operands go, the reconciler
// took the recreate for an uninstall and deleted the operands of a CSV that opted in to their
// cleanup; now they stay, and the finalizer is released.
func TestRecreateSeenThroughALaggingCache(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx := context.Background()
	createWidgetCRD(t, c)
	ns := namespace(t, c, "lagging")
	csv := createCSV(t, c, ns, "op.v1", "", true)
	createCRDPlan(t, c, ns, "op.v1", "widgets.example.com")
	operand := createWidget(t, c, ns, "data")
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
	r := &csvcleanup.Reconciler{
		Client:         laggingCache{Client: c},
		Reader:         c,
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
	if ok, err := gone(ctx, c, operand); err != nil || ok {
		t.Errorf("the operand of a CSV a Subscription will create again was deleted (gone %v, %v): the lagging cache made it an Uninstall", ok, err)
	}
}
