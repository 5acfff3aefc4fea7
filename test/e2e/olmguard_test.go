package e2e

// Running olmguard's own binaries against the test cluster, as separate processes: they can be
// stopped, restarted and killed like a real deployment.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
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
		if binDir, buildErr = os.MkdirTemp("", "olmguard-e2e-bin-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/webhook", "./cmd/controller")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// process is one running olmguard binary.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	health string // host:port of /healthz and /readyz
	done   chan struct{}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startProcess(t *testing.T, name string, args ...string) *process {
	t.Helper()
	p := &process{name: name, health: fmt.Sprintf("127.0.0.1:%d", freePort(t)), done: make(chan struct{})}
	logFile, err := os.CreateTemp("", "olmguard-e2e-"+name+"-*.log")
	if err != nil {
		t.Fatal(err)
	}
	p.log = logFile.Name()
	args = append(args, "--health-probe-bind-address="+p.health, "--metrics-bind-address=0")
	p.cmd = exec.Command(filepath.Join(olmguardBinaries(t), name), args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			out, _ := os.ReadFile(p.log)
			t.Logf("%s log:\n%s", name, tail(out, 4000))
		}
		os.Remove(p.log)
	})
	if err := p.waitReady(2 * time.Minute); err != nil {
		out, _ := os.ReadFile(p.log)
		t.Fatalf("%s not ready: %v\n%s", name, err, tail(out, 4000))
	}
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func (p *process) waitReady(timeout time.Duration) error {
	return wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("exited: %v", p.cmd.ProcessState)
		default:
		}
		resp, err := http.Get("http://" + p.health + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Stop sends SIGTERM and waits for the process to exit.
func (p *process) Stop() { p.signal(syscall.SIGTERM) }

// Kill sends SIGKILL and waits: nothing of a clean shutdown runs.
func (p *process) Kill() { p.signal(syscall.SIGKILL) }

func (p *process) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// startWebhook runs the webhook out of cluster with a self-signed certificate, registered at
// https://127.0.0.1:<port>. At test cleanup it is stopped and its configurations are removed.
func startWebhook(t *testing.T, c *cluster.Cluster, extra ...string) *process {
	t.Helper()
	ctx := context.Background()
	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	args := append([]string{"--kubeconfig=" + c.Kubeconfig, "--self-signed", fmt.Sprintf("--port=%d", port),
		fmt.Sprintf("--register-url=https://127.0.0.1:%d", port)}, extra...)
	p := startProcess(t, "webhook", args...)
	t.Cleanup(func() { removeWebhookConfigurations(t, c) })
	return p
}

// removeWebhookConfigurations deletes olmguard's webhook configurations, as `kubectl olmguard
// uninstall` does first: the cluster is then stock OLM again.
func removeWebhookConfigurations(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := context.Background()
	for _, o := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		err := c.Client.DeleteAllOf(ctx, o, client.MatchingLabels{"app.kubernetes.io/name": "olmguard"})
		if err != nil {
			t.Errorf("removing olmguard's %T: %v", o, err)
		}
	}
}

// startController runs the controller out of cluster.
func startController(t *testing.T, c *cluster.Cluster, extra ...string) *process {
	t.Helper()
	return startProcess(t, "controller", append([]string{"--kubeconfig=" + c.Kubeconfig}, extra...)...)
}
