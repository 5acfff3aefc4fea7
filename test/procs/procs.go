// Package procs builds olmguard's binaries and runs them as separate processes against a cluster,
// as a deployment would run them: they can be stopped, restarted and killed. The end-to-end tests
// and the demo use it.
package procs

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/image"
	"github.com/olmguard/olmguard/pkg/uninstall"
)

// Commands are olmguard's three binaries.
var Commands = []string{"./cmd/webhook", "./cmd/controller", "./cmd/kubectl-olmguard"}

// Build compiles Commands from the checkout at root into dir.
func Build(root, dir string) error { return goBuild(root, dir, Commands...) }

// goBuild builds pkgs as olmguard's image builds them (image.Olmguard: no cgo, paths trimmed,
// symbols stripped), so that the tests run, and the benchmarks measure, the binaries that ship: a
// build with cgo and symbols maps 2 MB more of its file into the controller's RSS.
func goBuild(root, dir string, pkgs ...string) error {
	args := append(append([]string{"build"}, image.Olmguard.BuildFlags...), "-o", dir+string(filepath.Separator))
	cmd := exec.Command("go", append(args, pkgs...)...)
	cmd.Env = append(os.Environ(), image.Olmguard.BuildEnv...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %v: %v\n%s", pkgs, err, out)
	}
	return nil
}

// Process is one running olmguard binary.
type Process struct {
	Name   string
	Log    string // file with its stdout and stderr
	health string // host:port of /healthz and /readyz
	cmd    *exec.Cmd
	done   chan struct{}
}

// FreePort returns a TCP port free on the loopback interface.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ReadyTimeout is how long Start waits for /readyz. A benchmark that starts a binary on a large
// cluster raises it.
var ReadyTimeout = 2 * time.Minute

// Start runs binary name from binDir with args, probes and metrics on free loopback ports, and
// waits until /readyz answers 200.
func Start(binDir, name string, args ...string) (*Process, error) {
	hp, err := FreePort()
	if err != nil {
		return nil, err
	}
	p := &Process{Name: name, health: fmt.Sprintf("127.0.0.1:%d", hp), done: make(chan struct{})}
	logFile, err := os.CreateTemp("", "olmguard-"+name+"-*.log")
	if err != nil {
		return nil, err
	}
	p.Log = logFile.Name()
	args = append(args, "--health-probe-bind-address="+p.health)
	if !hasFlag(args, "--metrics-bind-address") {
		args = append(args, "--metrics-bind-address=0")
	}
	p.cmd = exec.Command(filepath.Join(binDir, name), args...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	go func() { _ = p.cmd.Wait(); logFile.Close(); close(p.done) }()
	if err := p.waitReady(ReadyTimeout); err != nil {
		p.Stop()
		return p, fmt.Errorf("%s not ready: %w (log: %s)", name, err, p.Log)
	}
	return p, nil
}

// hasFlag reports whether args set flag (as --flag=value or --flag value).
func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

func (p *Process) waitReady(timeout time.Duration) error {
	return wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if p.Exited() {
			return false, fmt.Errorf("exited: %v", p.cmd.ProcessState)
		}
		resp, err := http.Get("http://" + p.health + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM and waits for the process to exit.
func (p *Process) Stop() { p.signal(syscall.SIGTERM) }

// Kill sends SIGKILL and waits: nothing of a clean shutdown runs.
func (p *Process) Kill() { p.signal(syscall.SIGKILL) }

func (p *Process) signal(sig syscall.Signal) {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// StartWebhook runs the webhook out of cluster with a self-signed certificate, registered with
// the cluster at https://127.0.0.1:<free port>. The controller started by StartController uses the
// same kubeconfig, so its user is the one allowed to release the cleanup finalizer.
func StartWebhook(binDir, kubeconfig string, extra ...string) (*Process, error) {
	return startWebhook(binDir, kubeconfig, "--self-signed", extra...)
}

// StartWebhookWithCertDir is StartWebhook serving the certificate in certDir (tls.crt, tls.key and
// ca.crt, hot reloaded, as a mounted Secret provides them) instead of a self-signed one: the
// configurations are registered with ca.crt and registered again when it changes.
func StartWebhookWithCertDir(binDir, kubeconfig, certDir string, extra ...string) (*Process, error) {
	return startWebhook(binDir, kubeconfig, "--cert-dir="+certDir, extra...)
}

// startWebhook runs the webhook with certArg choosing where its certificate comes from.
func startWebhook(binDir, kubeconfig, certArg string, extra ...string) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	user, err := WhoAmI(kubeconfig)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--kubeconfig=" + kubeconfig, certArg, fmt.Sprintf("--port=%d", port),
		fmt.Sprintf("--register-url=https://127.0.0.1:%d", port), "--cleanup-finalizer-users=" + user}, extra...)
	return Start(binDir, "webhook", args...)
}

// WhoAmI returns the user a kubeconfig authenticates as (a SelfSubjectReview).
func WhoAmI(kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(context.Background(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the cluster who %s is: %w", kubeconfig, err)
	}
	return r.Status.UserInfo.Username, nil
}

// StartController runs the controller out of cluster.
func StartController(binDir, kubeconfig string, extra ...string) (*Process, error) {
	return Start(binDir, "controller", append([]string{"--kubeconfig=" + kubeconfig}, extra...)...)
}

// RemoveWebhookConfigurations deletes olmguard's webhook configurations, as `kubectl olmguard
// uninstall` does first: the cluster then behaves as stock OLM.
func RemoveWebhookConfigurations(ctx context.Context, c client.Client) error {
	return uninstall.RemoveWebhookConfigurations(ctx, c)
}

// PeakRSS returns the process's peak resident set size (VmHWM in /proc/<pid>/status, Linux).
func (p *Process) PeakRSS() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb); err != nil {
				return 0, fmt.Errorf("parsing VmHWM %q: %w", v, err)
			}
			return kb * 1024, nil
		}
	}
	return 0, errors.New("no VmHWM in /proc status")
}

// CommandLinesWith lists the processes, other than this one, whose command line (its arguments
// joined by spaces) contains s: what is left of a component started with a path under s.
func CommandLinesWith(s string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(strings.ReplaceAll(string(b), "\x00", " "), s) {
			pids = append(pids, pid)
		}
	}
	return pids
}
