package procs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/testbin"
)

var built struct {
	once sync.Once
	dir  string
	err  error
}

// Binaries builds cmd/webhook, cmd/controller and cmd/kubectl-olmguard once per test binary and
// returns their directory.
func Binaries(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		root, err := testbin.RepoRoot()
		if err != nil {
			built.err = err
			return
		}
		if built.dir, built.err = os.MkdirTemp("", "olmguard-test-bin-"); built.err == nil {
			built.err = Build(root, built.dir)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

// Track stops p at test cleanup and shows the end of its log when the test failed; err fails the
// test now.
func Track(t *testing.T, p *Process, err error) *Process {
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
			_ = os.Remove(p.Log)
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// RunWebhook runs the webhook against the cluster of kubeconfig until the test ends, then
// removes its webhook configurations through c.
func RunWebhook(t *testing.T, kubeconfig string, c client.Client, extra ...string) *Process {
	t.Helper()
	t.Cleanup(func() {
		if err := RemoveWebhookConfigurations(context.Background(), c); err != nil {
			t.Error(err)
		}
	})
	p, err := StartWebhook(Binaries(t), kubeconfig, extra...)
	return Track(t, p, err)
}

// RunController runs the controller until the test ends.
func RunController(t *testing.T, kubeconfig string, extra ...string) *Process {
	t.Helper()
	p, err := StartController(Binaries(t), kubeconfig, extra...)
	return Track(t, p, err)
}

// Doctor runs the kubectl plugin's doctor against the cluster of kubeconfig and returns its exit
// status, stdout and stderr.
func Doctor(t *testing.T, ctx context.Context, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	bin := filepath.Join(Binaries(t), "kubectl-olmguard")
	cmd := exec.CommandContext(ctx, bin, append([]string{"doctor", "--kubeconfig", kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("running doctor: %v", err)
	return 0, "", ""
}
