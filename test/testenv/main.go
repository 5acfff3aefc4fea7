package testenv

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/test/testbin"
)

var shared *Env

// Main runs a package's tests against one control plane, started before m.Run and stopped after.
// hook, when not nil, runs once the control plane is up (to start a manager or a webhook); the
// function it returns runs after the tests. Without the binaries the tests run with no control
// plane and skip (or fail when OLMGUARD_REQUIRE_BINARIES=1) through Shared.
func Main(m *testing.M, hook func(*Env) (stop func() error, err error)) {
	os.Exit(runMain(m, hook))
}

// LogWhenVerbose sends controller-runtime's logs to stderr with -v and nowhere otherwise. A
// TestMain calls it before Main.
func LogWhenVerbose() {
	flag.Parse()
	w := io.Discard
	if testing.Verbose() {
		w = os.Stderr
	}
	logf.SetLogger(zap.New(zap.WriteTo(w), zap.UseDevMode(true)))
}

func runMain(m *testing.M, hook func(*Env) (func() error, error)) int {
	dir, missing := testbin.Check("kube-apiserver", "etcd")
	if missing != "" {
		return m.Run()
	}
	e, err := StartWith(dir, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() {
		if err := e.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	shared = e
	var stop func() error
	if hook != nil {
		if stop, err = hook(e); err != nil {
			fmt.Fprintln(os.Stderr, "setting up the test environment:", err)
			return 1
		}
	}
	code := m.Run()
	if stop != nil {
		if err := stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the test environment:", err)
			code = 1
		}
	}
	return code
}

// Shared returns the control plane Main started, or skips (fails when binaries are required).
func Shared(tb testing.TB) *Env {
	tb.Helper()
	if shared == nil {
		testbin.Require(tb, "kube-apiserver", "etcd")
		tb.Fatal("the package's TestMain must call testenv.Main")
	}
	return shared
}

// ManagerOptions are the controller's defaults with probes and metrics off.
func ManagerOptions() controller.Options {
	o := controller.DefaultOptions()
	o.HealthProbeBindAddress, o.MetricsBindAddress = "0", "0"
	return o
}

// RunManager starts olmguard's controller manager with the given reconcilers; stop ends it and
// returns its error.
func RunManager(cfg *rest.Config, o controller.Options, setups ...controller.Setup) (stop func() error, err error) {
	mgr, err := controller.NewManager(cfg, o, setups...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	return func() error { cancel(); return <-done }, nil
}
