package e2e

// olmguard's own binaries against the test cluster, as separate processes (test/procs).

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testbin"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// olmguardBinaries builds cmd/webhook and cmd/controller once per test binary.
func olmguardBinaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root, err := testbin.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		if binDir, buildErr = os.MkdirTemp("", "olmguard-e2e-bin-"); buildErr == nil {
			buildErr = procs.Build(root, binDir)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// track stops p at test cleanup and shows its log when the test failed.
func track(t *testing.T, p *procs.Process, err error) *procs.Process {
	t.Helper()
	if p != nil {
		t.Cleanup(func() {
			p.Stop()
			if t.Failed() {
				out, _ := os.ReadFile(p.Log)
				if len(out) > 4000 {
					out = out[len(out)-4000:]
				}
				t.Logf("%s log:\n%s", p.Name, out)
			}
			os.Remove(p.Log)
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startWebhook runs the webhook; at test cleanup it is stopped and its configurations removed.
func startWebhook(t *testing.T, c *cluster.Cluster, extra ...string) *procs.Process {
	t.Helper()
	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeWebhookConfigurations(t, c) })
	p, err := procs.StartWebhook(olmguardBinaries(t), c.Kubeconfig, extra...)
	return track(t, p, err)
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
	p, err := procs.StartController(olmguardBinaries(t), c.Kubeconfig, extra...)
	return track(t, p, err)
}
