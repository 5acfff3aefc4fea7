package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/olmguard/olmguard/test/testbin"
)

// Environment variables Main and Shared honour.
const (
	// EnvKubeconfig, when set, runs the tests against that existing cluster (e.g. kind) instead of
	// starting a kwok cluster; tests that fail nodes or stop components then skip (SkipUnlessKwok).
	// KUBECONFIG alone never does this: e2e tests must not run against a cluster by accident.
	EnvKubeconfig = "OLMGUARD_E2E_KUBECONFIG"
	// EnvKeep=1 keeps the cluster after the run for a look at it; Main prints its kubeconfig and
	// `hack/cluster.sh down <name>` deletes it.
	EnvKeep = "OLMGUARD_KEEP_CLUSTER"
)

var shared struct {
	set  bool
	opts Options
	once sync.Once

	mu      sync.Mutex // c and torn
	c       *Cluster
	torn    bool
	err     error
	skipMsg string
}

// Main is a TestMain for test binaries that need a cluster:
//
//	func TestMain(m *testing.M) { cluster.Main(m, cluster.Options{}) }
//
// The first Shared call starts one cluster for the whole binary (named olmguard-e2e-<pid> unless
// opts.Name says otherwise); after m.Run, or on SIGINT/SIGTERM, Main deletes it. Should the binary
// die before that (test timeout, panic), a watchdog process deletes it. When the binaries are
// missing, Shared skips the test, or fails it under OLMGUARD_REQUIRE_BINARIES=1; -short skips too.
// Main calls os.Exit.
func Main(m *testing.M, opts Options) {
	os.Exit(Run(m, opts))
}

// Run is Main without the exit: it returns m.Run's code (1 should the cluster fail to delete), for
// a TestMain with more to stop before it exits.
func Run(m *testing.M, opts Options) int {
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("%s%d", e2ePrefix, os.Getpid())
	}
	keep := os.Getenv(EnvKeep) == "1"
	opts.Persistent = keep
	shared.set, shared.opts = true, opts

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "[cluster] %v: deleting the cluster\n", s)
		_ = teardown(keep)
		os.Exit(1)
	}()

	code := m.Run()
	signal.Stop(sigs)
	close(sigs)
	if err := teardown(keep); err != nil {
		fmt.Fprintf(os.Stderr, "[cluster] deleting cluster: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func teardown(keep bool) error {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	c := shared.c
	if c == nil || shared.torn {
		return nil
	}
	shared.torn = true
	if keep && c.IsKwok() {
		_ = os.WriteFile(filepath.Join(ownDir(c.Name), keepMarker), nil, 0o644)
		fmt.Fprintf(os.Stderr, "[cluster] %s=1: keeping cluster %s\n  export KUBECONFIG=%s\n  hack/cluster.sh down %s   # to delete it\n",
			EnvKeep, c.Name, c.Kubeconfig, c.Name)
		return nil
	}
	return c.Stop()
}

// Shared returns the cluster of this test binary (see Main), starting it on first use. It skips
// or fails tb when there is none.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	if !shared.set {
		tb.Fatal("cluster.Shared needs cluster.Main in the package's TestMain")
	}
	shared.once.Do(startShared)
	shared.mu.Lock()
	c, err, skipMsg := shared.c, shared.err, shared.skipMsg
	shared.mu.Unlock()
	switch {
	case skipMsg != "":
		tb.Skip(skipMsg)
	case err != nil:
		tb.Fatalf("starting the test cluster: %v", err)
	}
	return c
}

// SkipUnlessKwok skips tb unless the cluster is a kwok cluster of this package (node failures and
// component restarts are only available there).
func (c *Cluster) SkipUnlessKwok(tb testing.TB) {
	tb.Helper()
	if !c.IsKwok() {
		tb.Skipf("needs a kwok cluster from test/cluster, not %s", c.Kubeconfig)
	}
}

func startShared() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		c   *Cluster
		err error
	)
	switch {
	case os.Getenv(EnvKubeconfig) != "":
		c, err = Attach(ctx, os.Getenv(EnvKubeconfig))
	case testing.Short():
		shared.skipMsg = "end-to-end cluster tests do not run with -short"
		return
	default:
		dir, missing := testbin.Check(Binaries...)
		if missing != "" {
			msg := fmt.Sprintf("test binary %s not found in %q; run `make test` (it builds them) or set %s", missing, dir, testbin.EnvDir)
			if os.Getenv(testbin.EnvRequire) == "1" {
				err = errors.New(msg)
			} else {
				shared.skipMsg = msg
			}
			break
		}
		c, err = Start(ctx, shared.opts)
	}
	shared.mu.Lock()
	shared.c, shared.err = c, err
	shared.mu.Unlock()
}
