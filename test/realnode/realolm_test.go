package realnode

import (
	"context"
	"os"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestRealOLMWithOlmguardInPods runs OLM's own operators (the real-OLM tier's binaries, as host
// processes) against a cluster where olmguard runs as the README installs it, in pods on the real
// node: F4 across OLM's upgrade from v0.25 to v0.28, then on v0.46 F1's interleaving and F3's
// uninstalls, each as OLM itself produces them.
func TestRealOLMWithOlmguardInPods(t *testing.T) {
	if _, err := cluster.OLMBinaries(realolm.Version); err != nil {
		t.Skipf("OLM's binaries are not here (the real-OLM tier skips too): %v", err)
	}
	t.Setenv(testenv.EnvOLMCRDs, os.Getenv(testenv.EnvOLMCRDs)) // restored after the test
	if err := realolm.UseOLMCRDs(); err != nil {
		t.Fatal(err)
	}
	c, n, kubectl := realNode(t, "realnode-olm")
	setFakeNodesSchedulable(t, c, n, false)
	kubectlApply(t, c, kubectl, "manifests/overlays/self-signed")
	waitAvailable(t, c)
	// From here on olmguard's pods stay where they are; OLM's Jobs and operators' pods go to the
	// fake nodes, which run them as OLM expects (the real node has none of their images).
	setSchedulable(t, c, func(name string) bool { return name == n.Name }, false)
	setFakeNodesSchedulable(t, c, n, true)
	ctx := context.Background()

	// F4 (OLM #3210), olmguard from the start: the same bundle installed before and after the
	// upgrade.
	csv := realolm.Zeta.CSVName("1.0.0")
	u := &realolm.UpgradeCluster{C: c, OLM: startOLM(t, c, realolm.OLMBefore, realolm.Zeta)}
	first, err := u.InstallZeta(ctx, "f4-first")
	if err != nil {
		t.Fatal(err)
	}
	if err := realolm.CSVSucceeded(ctx, c.Client, first, csv); err != nil {
		t.Fatalf("OLM %s: %v", realolm.OLMBefore, err)
	}
	if err := u.UpgradeOLM(ctx); err != nil {
		t.Fatalf("upgrading OLM to %s: %v", realolm.OLMAfter, err)
	}
	t.Cleanup(u.OLM.Stop)
	second, err := u.InstallZeta(ctx, "f4-second")
	if err != nil {
		t.Fatal(err)
	}
	if err := realolm.CSVSucceeded(ctx, c.Client, second, csv); err != nil {
		t.Errorf("F4: after the upgrade to OLM %s the second install of %s did not succeed with olmguard in its pods: %v", realolm.OLMAfter, csv, err)
	}
	u.OLM.Stop()

	startOLM(t, c, realolm.Version, realolm.Alpha, realolm.Beta, realolm.Gamma, realolm.Iota)
	t.Run("F1", func(t *testing.T) {
		results, err := realolm.SettledThenSecond(ctx, c.Client, "rn-f1", 3)
		if err != nil {
			t.Fatal(err)
		}
		if missing := realolm.Missing(results); len(missing) > 0 {
			t.Errorf("OLM %s: %d of %d plans miss Subscription b's owner with olmguard in its pods (first in %s)", realolm.Version, len(missing), len(results), missing[0].NS)
		}
	})
	t.Run("F3", func(t *testing.T) {
		u, err := realolm.Uninstall(ctx, c.Client, realolm.Gamma, "rn-f3")
		if err != nil {
			t.Fatal(err)
		}
		if why := u.UnlabelledRole(); why != "" {
			t.Logf("%s; left: %v", why, u.RoleLeft)
		}
		if u.RoleLeftLabelled() || !u.OperandLeft {
			t.Errorf("uninstalling %s from %s: bundled ClusterRole left %v (want false), operand left %v (want true: the CSV did not opt in)", realolm.Gamma.Name, u.NS, u.RoleLeft, u.OperandLeft)
		}
		// In its pods the controller may delete only what its role allows: the README's
		// "Operand cleanup" grant for this operator's operands.
		grant := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "olmguard-operands-" + realolm.Iota.Name, Labels: map[string]string{"olmguard.io/aggregate-to-controller": "true"}},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{realolm.Iota.Group()}, Resources: []string{"widgets"}, Verbs: []string{"list", "delete"}}},
		}
		if err := c.Client.Create(ctx, grant); err != nil {
			t.Fatal(err)
		}
		u, err = realolm.Uninstall(ctx, c.Client, realolm.Iota, "rn-f3-opted-in")
		if err != nil {
			t.Fatal(err)
		}
		if why := u.UnlabelledRole(); why != "" {
			t.Logf("%s; left: %v", why, u.RoleLeft)
		}
		if u.RoleLeftLabelled() || u.OperandLeft {
			t.Errorf("uninstalling %s, which opts in to operand cleanup, from %s: ClusterRole left %v, operand left %v (want neither)", realolm.Iota.Name, u.NS, u.RoleLeft, u.OperandLeft)
		}
	})
	t.Run("uninstall as the README says", func(t *testing.T) {
		setSchedulable(t, c, func(name string) bool { return name == n.Name }, true)
		checkUninstall(t, c, kubectl, "manifests/overlays/self-signed")
	})
}

// startOLM runs OLM version with a catalog of pkgs until the test ends or the caller stops it.
func startOLM(t *testing.T, c *cluster.Cluster, version string, pkgs ...realolm.Package) *cluster.OLM {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o, err := realolm.StartOLM(ctx, c, version, pkgs...)
	if err != nil {
		t.Fatalf("starting OLM %s: %v", version, err)
	}
	t.Cleanup(o.Stop)
	t.Logf("OLM %s running (%s)", version, o.Dir())
	return o
}
