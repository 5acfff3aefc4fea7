// Package testbin finds the kube-apiserver, etcd, kube-controller-manager, kube-scheduler, kwok,
// kwokctl and promtool binaries that hack/test-binaries.sh builds from the Go module proxy.
//
// make test sets OLMGUARD_BIN_DIR and OLMGUARD_REQUIRE_BINARIES=1, so a missing binary fails the
// run there; a plain `go test ./...` without them skips the tests that need a control plane.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// EnvDir names the directory holding the binaries.
const EnvDir = "OLMGUARD_BIN_DIR"

// EnvRequire, when "1", turns a missing binary into a failure instead of a skip.
const EnvRequire = "OLMGUARD_REQUIRE_BINARIES"

// Dir returns the binary directory, asking hack/test-binaries.sh when OLMGUARD_BIN_DIR is unset.
// It returns "" when neither knows.
func Dir() string {
	if d := os.Getenv(EnvDir); d != "" {
		return d
	}
	root, err := repoRoot()
	if err != nil {
		return ""
	}
	out, err := exec.Command(filepath.Join(root, "hack", "test-binaries.sh"), "dir").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// Require returns the directory if it holds every named binary. Otherwise it skips the test, or
// fails it when OLMGUARD_REQUIRE_BINARIES=1.
func Require(tb testing.TB, names ...string) string {
	tb.Helper()
	dir, missing := Check(names...)
	if missing == "" {
		return dir
	}
	msg := "test binary " + missing + " not found in " + dir + "; run `make test` (it builds them) or set " + EnvDir
	if os.Getenv(EnvRequire) == "1" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
	return ""
}

// Check returns the directory and the first named binary it lacks, or "" when all are there.
func Check(names ...string) (dir, missing string) {
	dir = Dir()
	for _, n := range names {
		if fi, err := os.Stat(filepath.Join(dir, n)); dir == "" || err != nil || fi.IsDir() {
			return dir, n
		}
	}
	return dir, ""
}

// RepoRoot returns the root of the olmguard checkout the tests run from.
func RepoRoot() (string, error) { return repoRoot() }

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", os.ErrNotExist
		}
	}
}
