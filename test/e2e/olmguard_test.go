package e2e

// olmguard's own binaries against the test cluster, as separate processes (test/procs).

import (
	"context"
	"testing"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
)

// olmguardBinaries builds olmguard's binaries once per test binary.
func olmguardBinaries(t *testing.T) string { return procs.Binaries(t) }

// track stops p at test cleanup and shows its log when the test failed.
func track(t *testing.T, p *procs.Process, err error) *procs.Process { return procs.Track(t, p, err) }

// startWebhook runs the webhook; at test cleanup it is stopped and its configurations removed.
func startWebhook(t *testing.T, c *cluster.Cluster, extra ...string) *procs.Process {
	t.Helper()
	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	return procs.RunWebhook(t, c.Kubeconfig, c.Client, extra...)
}

func removeWebhookConfigurations(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	if err := procs.RemoveWebhookConfigurations(context.Background(), c.Client); err != nil {
		t.Error(err)
	}
}

// startController runs the controller; it is stopped at test cleanup.
func startController(t *testing.T, c *cluster.Cluster, extra ...string) *procs.Process {
	t.Helper()
	return procs.RunController(t, c.Kubeconfig, extra...)
}
