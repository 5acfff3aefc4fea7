package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
)

// f5Wait is how long after its node turns NotReady a catalog pod must be replaced: the default
// --catalog-pod-grace (30s) plus 15s.
const f5Wait = 45 * time.Second

// TestBaselineF5CatalogPodStuckOnFailedNode: with stock OLM (the newest release, with the #3208
// fixes) a catalog pod stays bound to a node whose heartbeats stopped until taint-based eviction,
// minutes later; the catalog is unavailable meanwhile.
func TestBaselineF5CatalogPodStuckOnFailedNode(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sim := newSim(t, c, "olm-f5-baseline", olmsim.V0_46)
	cat := &olmsim.Catalog{Name: "f5-baseline"}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go sim.RunCatalogOperator(runCtx, 2*time.Second)

	out, err := scenario.FailCatalogNode(ctx, c, cat, f5Wait)
	if err != nil {
		t.Fatal(err)
	}
	if out.Recovered {
		t.Fatalf("stock OLM replaced the catalog pod of node %s after %s: the simulator must reproduce #3208", out.Node, out.Recovery)
	}
	t.Logf("%s after node %s turned NotReady no catalog pod runs elsewhere", f5Wait, out.Node)
}
