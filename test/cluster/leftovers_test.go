package cluster

import (
	"context"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestKillLeftovers: a component still running after kwokctl's delete (here a sleep whose command
// line names the cluster's directory, as every component's certificate flags do) is killed, and
// one of a cluster whose name only begins the same is not. Fails without killLeftovers: the
// process outlives the delete.
func TestKillLeftovers(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "clusters", "olmguard-e2e-1") + string(filepath.Separator)
	start := func(arg string) *exec.Cmd {
		cmd := exec.Command("sleep", "60", arg)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	leftover := start("--tls-cert-file=" + dir + "pki/admin.crt")
	other := start("--tls-cert-file=" + filepath.Join(root, "clusters", "olmguard-e2e-1-held", "pki", "admin.crt"))
	exited := make(chan struct{})
	go func() { _ = leftover.Wait(); close(exited) }()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := killLeftovers(ctx, dir); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-ctx.Done():
		t.Fatal("the leftover component still runs")
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the component of another cluster was killed: %v", err)
	}
}
