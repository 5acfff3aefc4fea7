package tier

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/supportmatrix"
)

// The builds the tier runs every scenario on. On the others (OpenShift 4.16 and 4.18) only the
// core scenarios run, unless OLMGUARD_REALOLM_ALL=1 (make test-realolm-all): so that four builds
// fit the suite's time budget side by side.
var fullBuilds = []string{realolm.Version, "openshift-4.20"}

// EnvAll runs every scenario on every build.
const EnvAll = "OLMGUARD_REALOLM_ALL"

// EnvResults names a directory: each scenario's result on the build under test is appended to
// <dir>/<build>.jsonl (test/supportmatrix.Result), which hack/supportmatrix turns into the README's support matrix.
const EnvResults = "OLMGUARD_REALOLM_RESULTS"

func fullScope() bool {
	return os.Getenv(EnvAll) == "1" || slices.Contains(fullBuilds, version())
}

func scopeLine() string {
	if fullScope() {
		return "every scenario"
	}
	return fmt.Sprintf("core scenarios only (%s=1 runs all)", EnvAll)
}

var (
	resultsMu   sync.Mutex
	skipReasons = map[string]string{} // test name -> why it skipped (testing.T does not say)
	kubeVersion string                // the shared cluster's kube-apiserver, once it runs
)

// skipf skips the test, keeping the reason for its recorded result.
func skipf(t *testing.T, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	resultsMu.Lock()
	skipReasons[t.Name()] = reason
	resultsMu.Unlock()
	t.Skip(reason)
}

func skipReason(t *testing.T) string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	return skipReasons[t.Name()]
}

func kubernetesVersion() string {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	return kubeVersion
}

// declare says what capability a test shows and whether it is core (run on every build).
// A test outside the core on a build outside fullBuilds skips. With EnvResults set, the test's
// outcome is recorded when it ends.
func declare(t *testing.T, capability string, core bool) {
	t.Helper()
	if dir := os.Getenv(EnvResults); dir != "" {
		t.Cleanup(func() { record(t, dir, capability) })
	}
	if !core && !fullScope() {
		skipf(t, "not a core scenario: runs on %s (make test-realolm-all, %s=1, runs it on every build)", strings.Join(fullBuilds, " and "), EnvAll)
	}
}

func record(t *testing.T, dir, capability string) {
	r := supportmatrix.Result{Build: version(), Kubernetes: kubernetesVersion(), Capability: capability, Test: t.Name(), Result: "pass"}
	switch {
	case t.Failed():
		r.Result = "fail"
	case t.Skipped():
		r.Result, r.Reason = "skip", skipReason(t)
	}
	line, err := json.Marshal(r)
	if err != nil {
		t.Error(err)
		return
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Error(err)
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, version()+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Error(err)
		return
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Error(err)
	}
}
