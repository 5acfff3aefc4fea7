package node

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olmguard/olmguard/test/testbin"
)

// EnvRequire, when set, makes a host that cannot run a real node fail a test instead of skipping
// it (hack/test.sh sets it as root, as on CI).
const EnvRequire = "OLMGUARD_REQUIRE_REAL_NODE"

// Binaries skips t, saying why, when this host cannot run a real node (fails it with EnvRequire
// set), and otherwise returns the kubelet and the kubectl of the pinned Kubernetes version, built
// into the binary cache when missing (hack/test-binaries.sh kubelet).
func Binaries(t *testing.T) (kubelet, kubectl string) {
	t.Helper()
	RequireHost(t)
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(root, "hack", "test-binaries.sh"), "kubelet").Output()
	if err != nil {
		t.Fatalf("building the kubelet: %v", err)
	}
	kubelet = strings.TrimSpace(string(out))
	return kubelet, filepath.Join(filepath.Dir(kubelet), "kubectl")
}

// RequireHost skips t, saying why, when this host cannot run a real node (fails it with
// EnvRequire set).
func RequireHost(t *testing.T) {
	t.Helper()
	if err := Supported(); err != nil {
		if errors.Is(err, ErrUnsupported) && os.Getenv(EnvRequire) == "" {
			t.Skip(err)
		}
		t.Fatal(err)
	}
}

// StopLeavingNothing stops n and fails t unless the host keeps nothing of it (Leftovers).
func StopLeavingNothing(t *testing.T, n *Node) {
	t.Helper()
	if err := n.Stop(); err != nil {
		t.Error(err)
	}
	if left := n.Leftovers(); len(left) > 0 {
		t.Errorf("the node left on the host: %v", left)
	}
}
