package cluster

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestReapAbandoned: a cluster whose owning process is gone and whose watchdog is gone with it
// (both killed, as a torn-down CI sandbox leaves them) is deleted by the next start; one owned by
// a live process, one whose watchdog still runs, one kept on purpose and one started Persistent
// (no owner) are left alone. Failed before: only e2e's shared clusters were reaped, and the
// real-OLM and real-node tiers' clusters of a killed run stayed, 700 MB of etcd data and logs.
func TestReapAbandoned(t *testing.T) {
	t.Setenv("OLMGUARD_CACHE", t.TempDir())
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	gone := dead.Process.Pid
	live := exec.Command("sleep", "300")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = live.Process.Kill(); _ = live.Wait() }()

	own := func(name string, pid int) {
		t.Helper()
		if err := recordOwner(name, pid); err != nil {
			t.Fatal(err)
		}
	}
	mkdir := func(dir string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	own("olmguard-realolm-1", gone)
	own("olmguard-realolm-1-global", gone)
	own("olmguard-mine", os.Getpid())
	own("olmguard-live", live.Process.Pid)
	own("olmguard-kept", gone)
	if err := os.WriteFile(filepath.Join(ownDir("olmguard-kept"), keepMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	mkdir(kwokClusterDir("olmguard-dev")) // hack/cluster.sh up: Persistent, no owner
	legacy := e2ePrefix + strconv.Itoa(gone)
	mkdir(ownDir(legacy))
	own("olmguard-watched", gone)
	watchdog := exec.Command("sh", "-c", "sleep 300", "olmguard-cluster-watchdog", strconv.Itoa(gone), "kwokctl",
		"olmguard-watched", ownDir("olmguard-watched"), noKubeconfig())
	if err := watchdog.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = watchdog.Process.Kill(); _ = watchdog.Wait() }()

	got := slices.Sorted(maps.Keys(abandoned()))
	if want := []string{legacy, "olmguard-realolm-1", "olmguard-realolm-1-global"}; !slices.Equal(got, want) {
		t.Errorf("abandoned %v, want %v", got, want)
	}

	reapAbandoned(context.Background(), t.TempDir()) // no kwokctl needed: only ownDirs are left
	for _, name := range []string{"olmguard-realolm-1", "olmguard-realolm-1-global", legacy} {
		if _, err := os.Stat(ownDir(name)); err == nil {
			t.Errorf("%s left", ownDir(name))
		}
	}
	if _, err := os.Stat(kwokClusterDir("olmguard-dev")); err != nil {
		t.Errorf("the persistent cluster was removed: %v", err)
	}
	for _, name := range []string{"olmguard-mine", "olmguard-live", "olmguard-kept", "olmguard-watched"} {
		if _, err := os.Stat(ownDir(name)); err != nil {
			t.Errorf("%s removed: %v", ownDir(name), err)
		}
	}
}
