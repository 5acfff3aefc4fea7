package procs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// MemCgroup is a cgroup v1 memory cgroup a measured binary runs in, so that its memory is read as
// a kubelet reads a container's: the working set (usage less inactive file cache, what an OOM kill
// and `kubectl top` judge) and the peak usage. The benchmarks use it; it needs root and the v1
// memory controller mounted at /sys/fs/cgroup/memory.
type MemCgroup struct {
	dir string

	mu       sync.Mutex
	peakWS   int64
	stop     chan struct{}
	stopped  chan struct{}
	sampling bool
}

// memoryRoot is where the cgroup v1 memory hierarchy is mounted.
const memoryRoot = "/sys/fs/cgroup/memory"

// ErrNoMemCgroup means the machine offers no cgroup v1 memory controller to measure in.
var ErrNoMemCgroup = errors.New("no cgroup v1 memory controller at " + memoryRoot)

// NewMemCgroup creates (or empties the figures of) cgroup olmguard-bench/<name>.
func NewMemCgroup(name string) (*MemCgroup, error) {
	if _, err := os.Stat(filepath.Join(memoryRoot, "memory.usage_in_bytes")); err != nil {
		return nil, ErrNoMemCgroup
	}
	dir := filepath.Join(memoryRoot, "olmguard-bench", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// A reused cgroup starts its peak again.
	_ = os.WriteFile(filepath.Join(dir, "memory.max_usage_in_bytes"), []byte("0"), 0o644)
	return &MemCgroup{dir: dir}, nil
}

// Wrap writes, into a new directory, an executable named bin that joins this cgroup and then
// executes binDir/bin with its arguments (same pid, so PeakRSS still reads the binary), and
// returns that directory: Start(dir, bin, ...) runs the binary inside the cgroup from its first
// allocation.
func (g *MemCgroup) Wrap(binDir, bin string) (string, error) {
	dir, err := os.MkdirTemp("", "olmguard-cgroup-wrap-")
	if err != nil {
		return "", err
	}
	target, err := filepath.Abs(filepath.Join(binDir, bin))
	if err != nil {
		return "", err
	}
	script := fmt.Sprintf("#!/bin/sh\necho $$ > '%s/cgroup.procs' || exit 1\nexec '%s' \"$@\"\n", g.dir, target)
	return dir, os.WriteFile(filepath.Join(dir, bin), []byte(script), 0o755)
}

// WorkingSet is the cgroup's usage less its inactive file cache, as the kubelet computes it.
func (g *MemCgroup) WorkingSet() (int64, error) { return CgroupWorkingSet(g.dir, false) }

// CgroupWorkingSet is the working set of the memory cgroup at dir as the kubelet reports it (and
// an OOM kill judges it): usage less the inactive file cache, which the kernel reclaims first.
// v2 reads cgroup v2's files, else v1's.
func CgroupWorkingSet(dir string, v2 bool) (int64, error) {
	usageFile, statKey := "memory.usage_in_bytes", "total_inactive_file"
	if v2 {
		usageFile, statKey = "memory.current", "inactive_file"
	}
	usage, err := ReadCgroupInt(filepath.Join(dir, usageFile))
	if err != nil {
		return 0, err
	}
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == statKey {
			inactive, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s in %s: %w", statKey, dir, err)
			}
			return max(usage-inactive, 0), nil
		}
	}
	return usage, nil
}

// PeakUsage is the cgroup's highest usage (page cache included) since it was created.
func (g *MemCgroup) PeakUsage() (int64, error) {
	return ReadCgroupInt(filepath.Join(g.dir, "memory.max_usage_in_bytes"))
}

// Sample reads the working set every interval until Stop, keeping its highest value: the cgroup
// keeps no peak of the working set itself.
func (g *MemCgroup) Sample(interval time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sampling {
		return
	}
	g.sampling, g.stop, g.stopped = true, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(g.stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if ws, err := g.WorkingSet(); err == nil {
				g.mu.Lock()
				g.peakWS = max(g.peakWS, ws)
				g.mu.Unlock()
			}
			select {
			case <-g.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// PeakWorkingSet stops the sampling and returns the highest working set it read.
func (g *MemCgroup) PeakWorkingSet() int64 {
	g.mu.Lock()
	sampling := g.sampling
	g.sampling = false
	g.mu.Unlock()
	if sampling {
		close(g.stop)
		<-g.stopped
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peakWS
}

// Remove deletes the cgroup once its processes are gone.
func (g *MemCgroup) Remove() { _ = os.Remove(g.dir) }

// ReadCgroupInt reads a cgroup file holding one integer.
func ReadCgroupInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}
