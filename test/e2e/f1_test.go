package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// f1Replays is how many times each mode replays OLM issue #3199. The simulator makes the
// interleaving happen every time (its hook creates B between OLM's two Subscription lists), so
// each replay shows the same thing: a few replays in fresh namespaces show it holds beyond the
// first namespace. The webhook's lookup against a view that lags is tested where the lag is held
// on purpose (test/ha), not by repetition.
const f1Replays = 8

// newSim returns an OLM simulator on the shared cluster, with its own OLM namespace.
func newSim(t *testing.T, c *cluster.Cluster, olmNamespace string, v olmsim.Version) *olmsim.Sim {
	t.Helper()
	sim, err := olmsim.Start(context.Background(), c.Config, c.Client.Scheme(), olmsim.Options{Version: v, Namespace: olmNamespace})
	if err != nil {
		t.Fatal(err)
	}
	// Its catalogs' pods must not stay on the nodes later tests fail.
	t.Cleanup(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: olmNamespace}}
		_ = client.IgnoreNotFound(c.Client.Delete(context.Background(), ns))
	})
	return sim
}

// TestF1InstallPlanOwners replays OLM issue #3199 without olmguard, with its webhook, and with
// only its controller, then checks the garbage collector's view of the repaired plans.
func TestF1InstallPlanOwners(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sim := newSim(t, c, "olm-f1", olmsim.V0_46)
	replayAll := func(t *testing.T, mode string) []scenario.F1Run {
		t.Helper()
		// A catalog per mode: OLM v0.43+ gives unpack Jobs a 300 s TTL, and a Job deleted by it
		// in the middle of a replay makes OLM unpack again (the three modes take longer than that).
		cat := scenario.F1Catalog()
		cat.Name = "f1-" + mode
		if err := sim.AddCatalog(ctx, cat); err != nil {
			t.Fatal(err)
		}
		runs := make([]scenario.F1Run, 0, f1Replays)
		for i := range f1Replays {
			r, err := scenario.Replay3199(ctx, sim, cat, fmt.Sprintf("f1-%s-%d", mode, i))
			if err != nil {
				t.Fatalf("replay %d: %v", i, err)
			}
			runs = append(runs, r)
		}
		return runs
	}

	t.Run("without olmguard the reference is missing", func(t *testing.T) {
		for i, r := range replayAll(t, "stock") {
			if scenario.OwnedBy(r.Plan, r.Auto.UID) || !scenario.OwnedBy(r.Plan, r.Manual.UID) {
				t.Fatalf("replay %d: plan %s owners %v; the simulator must reproduce #3199", i, r.Plan.Name, r.Plan.OwnerReferences)
			}
		}
	})

	t.Run("with the webhook every plan carries both references", func(t *testing.T) {
		startWebhook(t, c)
		waitWebhookActive(t, ctx, c)
		for i, r := range replayAll(t, "webhook") {
			if !r.Owned() {
				t.Errorf("replay %d: plan %s owners %v, want both Subscriptions", i, r.Plan.Name, r.Plan.OwnerReferences)
			}
		}
	})

	var repaired []scenario.F1Run
	t.Run("with the webhook away the controller repairs every plan", func(t *testing.T) {
		removeWebhookConfigurations(t, c)
		startController(t, c)
		repaired = replayAll(t, "controller")
		for i, r := range repaired {
			ip := &v1alpha1.InstallPlan{}
			err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
				if err := c.Client.Get(ctx, client.ObjectKeyFromObject(r.Plan), ip); err != nil {
					return false, err
				}
				return scenario.OwnedBy(ip, r.Auto.UID) && scenario.OwnedBy(ip, r.Manual.UID), nil
			})
			if err != nil {
				t.Fatalf("replay %d: plan %s not repaired: owners %v (%v)", i, r.Plan.Name, ip.OwnerReferences, err)
			}
		}
		// The repair is announced on the plan (Events are written asynchronously).
		testenv.Eventually(t, "OwnerReferencesRepaired event on plan "+repaired[0].Plan.Name, func(ctx context.Context) (bool, error) {
			events := &corev1.EventList{}
			if err := c.Client.List(ctx, events, client.InNamespace(repaired[0].Plan.Namespace)); err != nil {
				return false, err
			}
			for _, e := range events.Items {
				if e.Reason == "OwnerReferencesRepaired" && e.InvolvedObject.Name == repaired[0].Plan.Name {
					return true, nil
				}
			}
			return false, nil
		})
	})

	t.Run("garbage collector keeps a plan until its last Subscription is gone", func(t *testing.T) {
		if len(repaired) == 0 {
			t.Skip("no repaired plan")
		}
		r := repaired[0]
		if err := c.Client.Delete(ctx, r.Auto); err != nil {
			t.Fatal(err)
		}
		// The garbage collector acts on the deletion: it removes the reference to the deleted
		// Subscription and keeps the plan, which another Subscription still owns.
		ip := &v1alpha1.InstallPlan{}
		testenv.Eventually(t, "the garbage collector dropped the deleted Subscription's reference", func(ctx context.Context) (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(r.Plan), ip); err != nil {
				return false, fmt.Errorf("plan %s gone after deleting one of its two Subscriptions: %w", r.Plan.Name, err)
			}
			return !scenario.OwnedBy(ip, r.Auto.UID), nil
		})
		if ip.DeletionTimestamp != nil || !scenario.OwnedBy(ip, r.Manual.UID) {
			t.Fatalf("plan %s after deleting one of its two Subscriptions: being deleted %t, owners %v", r.Plan.Name, ip.DeletionTimestamp != nil, ip.OwnerReferences)
		}
		if err := c.Client.Delete(ctx, r.Manual, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
		err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, client.ObjectKeyFromObject(r.Plan), ip)
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		if err != nil {
			t.Fatalf("plan %s not garbage collected after both Subscriptions were deleted: %v", r.Plan.Name, err)
		}
	})
}
