package tier

import (
	"context"
	"testing"
	"time"

	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
)

// upgradeWithUserMetadata is realolm.UpgradeWithUserMetadata in a fresh namespace named after
// prefix, logged to the test; stock tolerates OLM's stale resolution race.
func upgradeWithUserMetadata(t *testing.T, c *cluster.Cluster, prefix string, stock bool) realolm.SAKept {
	t.Helper()
	return must(realolm.UpgradeWithUserMetadata(context.Background(), c.Client, prefix, stock, t.Logf))(t)
}

// serviceAccountScenario runs the upgrade on stock OLM, reports what stock kept, then with
// olmguard, and asserts that olmguard kept everything. wantStockDrops is what the OLM under test
// is known to drop (olm-facts N2), reported when stock kept it after all.
func serviceAccountScenario(t *testing.T, c *cluster.Cluster, version, prefix string, wantStockDrops realolm.SAKept) {
	stock := upgradeWithUserMetadata(t, c, prefix+"-stock", true)
	switch {
	case !stock.Upgraded:
		t.Logf("OLM %s stock: the upgrade did not run this time, nothing to compare", version)
	case wantStockDrops.Annotation && stock.Annotation || wantStockDrops.Label && stock.Label || wantStockDrops.PullSecret && stock.PullSecret:
		t.Logf("OLM %s stock kept more than olm-facts N2 says it drops (%s): the drop was not reproduced this run", version, stock)
	default:
		t.Logf("OLM %s stock after an upgrade: %s (OLM's step dropped what olm-facts N2 says it drops)", version, stock)
	}
	runOlmguard(t, c)
	guarded := upgradeWithUserMetadata(t, c, prefix+"-olmguard", false)
	if !guarded.Annotation || !guarded.Label || !guarded.PullSecret {
		t.Errorf("OLM %s with olmguard after an upgrade: %s; want all kept", version, guarded)
	}
}

// stockDrops is what OLM version drops from an operator's ServiceAccount on an upgrade (olm-facts
// N2): every annotation too before the fix of #3607 (v0.33.0 upstream, OpenShift 4.20).
func stockDrops(version string) realolm.SAKept {
	drops := realolm.SAKept{Label: true, PullSecret: true}
	if version == "openshift-4.16" || version == "openshift-4.18" {
		drops.Annotation = true
	}
	return drops
}

// TestServiceAccountMetadataKeptOnUpgrade replays OLM #3607 on OLM's own binaries: a user annotates
// (EKS IRSA's role), labels and adds a pull secret to an operator's ServiceAccount; an upgrade's
// ServiceAccount step rewrites it. OLM v0.28.0 (before the fix in v0.33.0) removes every
// annotation, labels and pull secrets; v0.46.0 still removes the label and the pull secret. Stock
// is reported; with olmguard all three are asserted kept.
// Fails before the fix: nothing served ServiceAccount updates, so olmguard's round lost them too.
func TestServiceAccountMetadataKeptOnUpgrade(t *testing.T) {
	declare(t, "N2: ServiceAccount metadata kept (#3607)", true)
	t.Run(realolm.OLMAfter+" (before the fix)", func(t *testing.T) {
		if version() != realolm.Version {
			skipf(t, "starts its own cluster with OLM %s beside the tier's %s; OLM under test is %s", realolm.OLMAfter, realolm.Version, version())
		}
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := clusterOfItsOwn(ctx, t, "sa")
		o := must(realolm.StartOLM(ctx, c, realolm.OLMAfter, realolm.Alpha))(t)
		t.Cleanup(o.Stop)
		serviceAccountScenario(t, c, realolm.OLMAfter, "sa028", realolm.SAKept{Annotation: true, Label: true, PullSecret: true})
	})
	t.Run("tier's OLM", func(t *testing.T) {
		t.Parallel()
		c, o := realOLM(t)
		serviceAccountScenario(t, c, o.Version, "sa", stockDrops(o.Version))
		checkLogs(t, o)
	})
}
