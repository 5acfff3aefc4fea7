package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/olmguard/olmguard/test/procs"
)

const (
	e2ePrefix  = "olmguard-e2e-"
	keepMarker = "keep"
	// ownerFile, in a cluster's ownDir, holds the pid of the process a cluster that is not
	// Persistent belongs to: its watchdog deletes the cluster once that process is gone, and
	// reapAbandoned does when the watchdog died with it.
	ownerFile = "owner"
)

// recordOwner writes pid as the owner of the named cluster.
func recordOwner(name string, pid int) error {
	if err := os.MkdirAll(ownDir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(ownDir(name), ownerFile), []byte(strconv.Itoa(pid)), 0o644)
}

// e2eName matches the shared clusters of test binaries older than ownerFile (olmguard-e2e-<pid>).
var e2eName = regexp.MustCompile("^" + regexp.QuoteMeta(e2ePrefix) + `(\d+)$`)

// ownerOf returns the pid that owns the named cluster, and false for a cluster nobody owns (one
// started Persistent, by hack/cluster.sh up or OLMGUARD_KEEP_CLUSTER=1, is the user's to delete).
func ownerOf(name string) (int, bool) {
	if _, err := os.Stat(filepath.Join(ownDir(name), keepMarker)); err == nil {
		return 0, false
	}
	if b, err := os.ReadFile(filepath.Join(ownDir(name), ownerFile)); err == nil {
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		return pid, err == nil
	}
	if m := e2eName.FindStringSubmatch(name); m != nil {
		pid, _ := strconv.Atoi(m[1])
		return pid, true
	}
	return 0, false
}

// abandoned returns the clusters whose owner is gone while no watchdog of theirs runs, each with
// its owner's pid: a test binary and its watchdog both killed (a CI job's sandbox torn down, the
// machine restarted) leave a cluster's etcd data, logs and certificates behind, hundreds of MB
// each.
func abandoned() map[string]int {
	seen := map[string]bool{}
	out := map[string]int{} // name: its owner's pid
	for _, name := range append(clusterNames(), dirNames(filepath.Join(WorkDir(), "olmguard"))...) {
		if seen[name] {
			continue
		}
		seen[name] = true
		pid, owned := ownerOf(name)
		if !owned || pid == os.Getpid() || procs.Alive(pid) {
			continue
		}
		if len(procs.CommandLinesWith(ownDir(name)+string(filepath.Separator))) > 0 ||
			len(procs.CommandLinesWith(ownDir(name)+" ")) > 0 {
			continue // its watchdog runs, and deletes it
		}
		out[name] = pid
	}
	return out
}

// reapAbandoned deletes the abandoned clusters (abandoned), one process at a time.
func reapAbandoned(ctx context.Context, binDir string) {
	lock, err := tryLockFile(filepath.Join(WorkDir(), "reap.lock"))
	if err != nil || lock == nil {
		return // another process is reaping
	}
	defer lock.Close()
	for name, pid := range abandoned() {
		fmt.Fprintf(os.Stderr, "[cluster] deleting abandoned cluster %s (process %d is gone, and its watchdog)\n", name, pid)
		if err := deleteAbandoned(ctx, name, binDir); err != nil {
			fmt.Fprintf(os.Stderr, "[cluster] %v\n", err)
		}
	}
}

// deleteAbandoned deletes the cluster through kwokctl, which stops what still runs of it, or only
// test/cluster's own directory of it when kwokctl's is gone.
func deleteAbandoned(ctx context.Context, name, binDir string) error {
	if _, err := os.Stat(kwokClusterDir(name)); err != nil {
		return os.RemoveAll(ownDir(name))
	}
	return (&kwokctl{name: name, binDir: binDir}).delete(ctx)
}

func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names
}
