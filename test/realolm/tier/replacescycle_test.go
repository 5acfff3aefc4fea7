package tier

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestReplacesCycle (OCPBUGS-23954, OLM #3891): on stock OLM whose olm-operator reports
// ClusterOperator status (--writePackageServerStatusName, as on OpenShift), a CSV labelled
// olm.clusteroperator.name whose spec.replaces is its own name makes olm-operator loop: its
// "<csv> replaced by <csv>" lines pass thousands and keep growing across reads, and keep growing
// after the CSV is deleted (realolm.ReplacesLoopOnStock). On a cluster of its own: the loop spins
// olm-operator until it stops, which would disturb every other scenario; OLM is stopped as soon
// as the loop is shown. With olmguard's --policy-replaces-cycle=enforce the same CSV is refused,
// citing OCPBUGS-23954; in warn (the default) it is admitted with the warning. Fails without the
// guard: the CSV was admitted silently in both modes.
func TestReplacesCycle(t *testing.T) {
	declare(t, "N1: spec.replaces cycle (OCPBUGS-23954)", false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := clusterOfItsOwn(ctx, t, "cycle")
	o := must(c.StartOLMWith(ctx, version(), realolm.ReplacesCycleOLM()))(t)
	t.Cleanup(o.Stop)
	name := "cycle-stock.v1.0.0"

	t.Run("stock", func(t *testing.T) {
		defer o.Stop() // the loop spins a core until olm-operator stops
		ns := operatorNamespace(t, c, "cycle-stock")
		loop, err := realolm.ReplacesLoopOnStock(ctx, c.Client, o, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("stock OLM %s: %d, then %d log lines say CSV %s replaced by itself: %s", o.Version, loop.First, loop.Second, name, loop.Sample)
		t.Logf("stock OLM %s: deleting the CSV does not end the loop: %d lines at the delete, %d after (the CSV: %s, finalizers %v)",
			o.Version, loop.AtDelete, loop.AfterDelete, loop.CSVAfterDelete, loop.Finalizers)
	})

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode string
		args []string
	}{{"enforce", []string{"--policy-replaces-cycle=enforce"}}, {"warn", nil}} {
		t.Run("olmguard-"+tc.mode, func(t *testing.T) {
			procs.RunWebhook(t, c.Kubeconfig, c.Client, tc.args...)
			ns := operatorNamespace(t, c, "cycle-"+tc.mode)
			name := "cycle-" + tc.mode + ".v1.0.0"
			got := must(realolm.CreateSelfReplacing(ctx, c.Config, testenv.Scheme(), ns, name))(t)
			err := got.Err
			switch tc.mode {
			case "enforce":
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "replaces itself") || !strings.Contains(err.Error(), "OCPBUGS-23954") ||
					!strings.Contains(err.Error(), "restart olm-operator") {
					t.Fatalf("with olmguard (enforce): %v, want the denial naming the CSV, OCPBUGS-23954 and the recovery", err)
				}
				t.Logf("with olmguard (enforce): %v", err)
			default:
				if err != nil || !strings.Contains(got.Warnings, "CSV "+name+" in namespace "+ns+" replaces itself") {
					t.Fatalf("with olmguard (warn): %v, warnings %q, want it admitted with the warning", err, got.Warnings)
				}
				t.Logf("with olmguard (warn): admitted with %q", got.Warnings)
			}
		})
	}
}
