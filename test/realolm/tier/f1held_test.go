package tier

import (
	"context"
	"testing"
	"time"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/scenario"
)

// TestF1Held: OLM #3199 on OLM's own binaries, every time. On a cluster of its own, catalog-operator
// reaches the apiserver through a proxy (realolm.ReadHold) that holds the answer to the first of
// its namespace sync's two live Subscription Lists while the test creates Subscription B
// (realolm.HeldSecond), so B is in the second List and not in the first. Stock
// OLM then leaves B out of the owners of the plan that installs B in every namespace: asserted.
// With olmguard's webhook and controller the same interleaving leaves no plan without B, and the
// plans stock OLM got wrong are repaired. Fails before the fix (olmguard absent): every guarded
// plan lacks B, as the stock ones do.
func TestF1Held(t *testing.T) {
	declare(t, "F1: #3199 reproduced on stock OLM (held read)", false)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := clusterOfItsOwn(ctx, t, "held")
	o, hold, err := realolm.StartHeldOLM(ctx, c, version(), realolm.Alpha, realolm.Beta)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hold.Close) // before the cluster stops: nothing stays held
	round := realolm.HeldSecond(hold)

	stock := must(round(ctx, c.Client, "f1-held-stock", f1Namespaces))(t)
	missed := realolm.Missing(stock)
	t.Logf("stock OLM %s, B created while the namespace sync is held between its two Subscription Lists: Subscription B missing from its InstallPlan's owners in %d of %d namespaces",
		o.Version, len(missed), len(stock))
	for _, r := range stock {
		if scenario.OwnedBy(r.Plan, r.Sub.UID) {
			t.Errorf("stock OLM %s: %s/%s is owned by Subscription b although b was created between the sync's two Lists: %+v (the hold missed; see %s/readhold.log)",
				o.Version, r.NS, r.Plan.Name, r.Plan.OwnerReferences, o.Dir())
		}
	}

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client)
	procs.RunController(t, c.Kubeconfig)
	for _, r := range missed {
		waitOwnedBy(t, c, r, "the controller repairs")
	}

	guarded := must(round(ctx, c.Client, "f1-held-olmguard", f1Namespaces))(t)
	t.Logf("with olmguard, the same held interleaving: Subscription B missing from its InstallPlan's owners when B's CSV succeeded in %d of %d namespaces",
		len(realolm.Missing(guarded)), len(guarded))
	for _, r := range guarded {
		waitOwnedBy(t, c, r, "with olmguard, Subscription b owns")
	}
	checkLogs(t, o)
}
