package realolm

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// doctorChecks runs `kubectl olmguard doctor -n ns -o json` and returns its exit status and the
// checks it reported.
func doctorChecks(t *testing.T, c *cluster.Cluster, ns string) (int, []string) {
	t.Helper()
	code, out, errOut := procs.Doctor(t, context.Background(), c.Kubeconfig, "-n", ns, "-o", "json")
	var report doctor.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("doctor -o json: %v\n%s\n%s", err, out, errOut)
	}
	var checks []string
	for _, f := range report.Findings {
		checks = append(checks, f.Check)
	}
	return code, checks
}

// TestDoctor: on a healthy install by real OLM without olmguard, doctor reports only that olmguard
// does not run (one finding, not one per CSV); once olmguard runs, it reports nothing.
func TestDoctor(t *testing.T) {
	c, _ := realOLM(t)
	ns := operatorNamespace(t, c, "doctor")
	subscribe(t, c, ns, "beta", Beta, v1alpha1.ApprovalAutomatic, "")
	csv := waitCSV(t, c, ns, Beta.CSVName("1.0.0"))

	code, checks := doctorChecks(t, c, ns)
	if code != 1 || !slices.Equal(checks, []string{"OlmguardNotRunning"}) {
		t.Errorf("doctor on stock OLM: exit %d, checks %v; want exit 1 and only OlmguardNotRunning", code, checks)
	}

	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client)
	procs.RunController(t, c.Kubeconfig)
	testenv.Eventually(t, "the controller adds its finalizer to "+csv.Name, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.ClusterServiceVersion{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(csv), got)
		return err == nil && slices.Contains(got.Finalizers, olmguard.CleanupFinalizer), err
	})
	if code, checks := doctorChecks(t, c, ns); code != 0 || len(checks) != 0 {
		t.Errorf("doctor with olmguard running: exit %d, checks %v; want exit 0 and none", code, checks)
	}
}
