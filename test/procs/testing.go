package procs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/testbin"
)

// Once builds main packages of this module once per test binary, into a temporary directory.
type Once struct {
	once sync.Once
	dir  string
	err  error
}

// Dir builds pkgs (./cmd/... paths from the module's root) the first time and returns their
// directory; a failed build fails every test that asks.
func (o *Once) Dir(t *testing.T, pkgs ...string) string {
	t.Helper()
	o.once.Do(func() {
		root, err := testbin.RepoRoot()
		if err != nil {
			o.err = err
			return
		}
		removeOrphanBuilds()
		if o.dir, o.err = os.MkdirTemp("", fmt.Sprintf("%s%d-", buildPrefix, os.Getpid())); o.err == nil {
			o.err = goBuild(root, o.dir, pkgs...)
		}
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.dir
}

var built Once

// buildPrefix names the directories Once builds into: buildPrefix<pid>-<random>. A test binary
// has no hook at its exit, so each build first removes those of test processes that have ended:
// without that every run of a tier left its binaries (130 MB) behind, and the machine's disk
// filled up.
const buildPrefix = "olmguard-test-bin-"

// removeOrphanBuilds removes the build directories of processes that are gone, and those of
// the naming before the pid (no pid to check) a day after they were made.
func removeOrphanBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*"))
	for _, dir := range dirs {
		pidText, _, withPid := strings.Cut(strings.TrimPrefix(filepath.Base(dir), buildPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		switch {
		case withPid && err == nil:
			if pid == os.Getpid() || Alive(pid) {
				continue
			}
		default:
			if fi, err := os.Stat(dir); err != nil || time.Since(fi.ModTime()) < 24*time.Hour {
				continue
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// Alive reports whether pid runs (a zombie does not count).
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no procfs: trust kill(0)
	}
	// pid (comm) state ...: comm may contain spaces and parentheses.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}

// Binaries builds cmd/webhook, cmd/controller and cmd/kubectl-olmguard once per test binary and
// returns their directory.
func Binaries(t *testing.T) string { return built.Dir(t, Commands...) }

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
	return Output(t, exec.CommandContext(ctx, bin, append([]string{"doctor", "--kubeconfig", kubeconfig}, args...)...))
}

// Output runs cmd and returns its exit status, stdout and stderr; a command that cannot be run
// at all fails the test.
func Output(t testing.TB, cmd *exec.Cmd) (int, string, string) {
	t.Helper()
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
	t.Fatalf("running %s: %v", cmd.Path, err)
	return 0, "", ""
}

// PermissionDenied matches a log line of olmguard's binaries that reports a request the
// apiserver refused for lack of RBAC: the tests that run them with the shipped RBAC look for it.
var PermissionDenied = regexp.MustCompile(`(?i)forbidden|cannot (get|list|watch|patch|update|create|delete)`)
