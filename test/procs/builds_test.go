package procs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// The binaries a test process built are removed by the next build once that process is gone;
// those of a live process, and a recent directory of the naming without a pid, stay. Fails
// before the fix: nothing removed them, and 253 runs left 31 GB in the temporary directory.
func TestOrphanBuildsRemoved(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	ended := exec.Command("true")
	if err := ended.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name string, age time.Duration) string {
		dir := filepath.Join(os.TempDir(), name)
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-age)
		if err := os.Chtimes(dir, then, then); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	gone := mk(fmt.Sprintf("%s%d-1", buildPrefix, ended.Process.Pid), 0)
	mine := mk(fmt.Sprintf("%s%d-2", buildPrefix, os.Getpid()), 0)
	live := mk(fmt.Sprintf("%s%d-3", buildPrefix, os.Getppid()), 0)
	oldNaming := mk(buildPrefix+"123456", 48*time.Hour)
	recentOldNaming := mk(buildPrefix+"654321", time.Minute)
	other := mk("something-else", 48*time.Hour)

	removeOrphanBuilds()
	for dir, want := range map[string]bool{gone: false, mine: true, live: true, oldNaming: false, recentOldNaming: true, other: true} {
		if _, err := os.Stat(dir); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(dir), err == nil, want)
		}
	}
}
