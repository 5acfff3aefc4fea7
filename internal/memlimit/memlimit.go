// Package memlimit gives the Go runtime a soft memory limit from the container's cgroup when
// GOMEMLIMIT is not set, so that the garbage collector works harder before the kernel's limit is
// reached instead of the container being OOM-killed. olmguard's manifests and chart set
// GOMEMLIMIT from the container's memory limit; a binary started without it (a hand-written
// Deployment, a pod whose env was patched away) would otherwise collect only at GOGC's pace and
// reach its limit with garbage still on the heap. An explicit GOMEMLIMIT always wins, "off"
// included.
//
// The cgroup files are read through an fs.FS rooted at "/" so that tests can give a fake root.
package memlimit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// Percent is the share of the cgroup's memory limit given to the Go runtime. The kernel charges
// the cgroup for more than the runtime counts against its limit (pages of files read, memory of
// the kernel's own structures for the process), and the collector needs room to catch up with a
// burst of allocation before the kernel's limit is reached.
const Percent = 90

// Env is the variable that, when set (to any value but ""), decides alone; the Go runtime reads it
// at start.
const Env = "GOMEMLIMIT"

// Where a Choice came from.
const (
	FromEnv    = "GOMEMLIMIT"
	FromCgroup = "cgroup"
	NoLimit    = "none"
)

// Choice is what Choose decided, for the log.
type Choice struct {
	// Source is FromEnv, FromCgroup or NoLimit; "" for a Choice nobody made (logged as nothing).
	Source string
	// Env is GOMEMLIMIT's value when Source is FromEnv.
	Env string
	// Limit is the soft limit to set, in bytes, when Source is FromCgroup: Percent of Cgroup.
	Limit int64
	// Cgroup is the cgroup's memory limit in bytes and File the file it was read from (relative
	// to the root; logged as an absolute path), when one was found.
	Cgroup int64
	File   string
	// Err says why the cgroup's limit could not be read; no limit is set then.
	Err error
}

// Apply chooses from the process's environment and the machine's cgroup files, and sets the
// runtime's memory limit when the choice is the cgroup's. Call it first thing in main.
func Apply() Choice {
	c := Choose(os.Getenv, os.DirFS("/"))
	if c.Source == FromCgroup {
		debug.SetMemoryLimit(c.Limit)
	}
	return c
}

// Choose decides the Go runtime's soft memory limit: none to set when GOMEMLIMIT is set (the
// runtime has applied it), else Percent of the memory limit of the process's cgroup under root,
// else none.
func Choose(getenv func(string) string, root fs.FS) Choice {
	if v := getenv(Env); v != "" {
		return Choice{Source: FromEnv, Env: v}
	}
	limit, file, err := CgroupLimit(root)
	switch {
	case err != nil:
		return Choice{Source: NoLimit, File: file, Err: err}
	case limit <= 0:
		return Choice{Source: NoLimit, File: file}
	}
	return Choice{Source: FromCgroup, Limit: limit/100*Percent + limit%100*Percent/100, Cgroup: limit, File: file}
}

// Log writes the choice as one line; a zero Choice writes nothing.
func (c Choice) Log(log logr.Logger) {
	switch c.Source {
	case FromEnv:
		log.Info("Go memory limit from "+Env, Env, c.Env)
	case FromCgroup:
		log.Info(fmt.Sprintf("Go memory limit set to %d%% of the cgroup's memory limit (%s unset)", Percent, Env),
			"limit", c.Limit, "cgroupLimit", c.Cgroup, "file", "/"+c.File)
	case NoLimit:
		if c.Err != nil {
			log.Error(c.Err, "no Go memory limit: "+Env+" is unset and the cgroup's memory limit is unreadable")
			return
		}
		if c.File == "" {
			log.Info("no Go memory limit: " + Env + " is unset and no cgroup memory limit file was found")
			return
		}
		log.Info("no Go memory limit: "+Env+" is unset and the cgroup sets no memory limit", "file", "/"+c.File)
	}
}

// The files read, relative to the root. The cgroup v2 hierarchy is mounted at cgroupV2Mount and
// the v1 memory controller's at cgroupV1Mount, as every container runtime does.
const (
	selfCgroup    = "proc/self/cgroup"
	cgroupV2Mount = "sys/fs/cgroup"
	cgroupV1Mount = "sys/fs/cgroup/memory"
	cgroupV2File  = "memory.max"
	cgroupV1File  = "memory.limit_in_bytes"
	// maxFileSize bounds what is read of any of these files: a few bytes each, a few lines for
	// /proc/self/cgroup.
	maxFileSize = 64 << 10
	// v1Unlimited: cgroup v1 writes "no limit" as the largest page-aligned int64
	// (9223372036854771712); any limit at or above 2^62 bytes is no limit.
	v1Unlimited = int64(1) << 62
)

// CgroupLimit returns the memory limit of the process's cgroup in bytes, 0 when it has none, and
// the file it read. It reads /proc/self/cgroup for the process's cgroup (the memory controller's
// line of cgroup v1 when there is one, else the cgroup v2 line "0::<path>") and then that
// cgroup's memory.max (v2) or memory.limit_in_bytes (v1) under the hierarchy's mount. Inside a
// container the mount holds the container's own cgroup at its root (a cgroup namespace, or a
// bind mount of the cgroup), so when the file under the cgroup's path does not exist the one at
// the mount's root is read. No file to read is no limit; a file that does not parse is an error.
func CgroupLimit(root fs.FS) (limit int64, file string, err error) {
	data, err := readSmall(root, selfCgroup)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil // not Linux, or no /proc
	}
	if err != nil {
		return 0, selfCgroup, err
	}
	mount, name, cgroup, err := parseSelfCgroup(data)
	if err != nil {
		return 0, selfCgroup, err
	}
	if mount == "" {
		return 0, "", nil // no memory controller and no cgroup v2 line
	}
	for _, f := range candidates(mount, cgroup, name) {
		data, err := readSmall(root, f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, f, err
		}
		limit, err := parseLimit(data, name == cgroupV1File)
		if err != nil {
			return 0, f, fmt.Errorf("%s: %w", f, err)
		}
		return limit, f, nil
	}
	return 0, "", nil
}

// parseSelfCgroup reads /proc/self/cgroup ("hierarchy-ID:controller-list:cgroup-path" per line)
// and returns the mount, limit file and cgroup path of the memory limit: the v1 memory
// controller's when a line lists it, else the v2 line's. mount is "" when there is neither.
func parseSelfCgroup(data []byte) (mount, file, cgroup string, err error) {
	var v2 string
	var hasV2 bool
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		fields := strings.SplitN(line, ":", 3)
		if len(fields) != 3 {
			return "", "", "", fmt.Errorf("%s line %d: %q is not hierarchy:controllers:path", selfCgroup, i+1, line)
		}
		id, controllers, p := fields[0], fields[1], fields[2]
		if _, err := strconv.ParseUint(id, 10, 32); err != nil {
			return "", "", "", fmt.Errorf("%s line %d: hierarchy ID %q is not a number", selfCgroup, i+1, id)
		}
		if !strings.HasPrefix(p, "/") {
			return "", "", "", fmt.Errorf("%s line %d: cgroup path %q is not absolute", selfCgroup, i+1, p)
		}
		if id == "0" && controllers == "" {
			v2, hasV2 = p, true
			continue
		}
		for c := range strings.SplitSeq(controllers, ",") {
			if c == "memory" {
				return cgroupV1Mount, cgroupV1File, p, nil
			}
		}
	}
	if hasV2 {
		return cgroupV2Mount, cgroupV2File, v2, nil
	}
	return "", "", "", nil
}

// candidates are the files that may hold the limit: the cgroup's own under the mount, when its
// path stays under the mount (a cgroup outside the namespace's root reads as "/../x"), then the
// mount's root.
func candidates(mount, cgroup, file string) []string {
	rootFile := path.Join(mount, file)
	own := path.Join(mount, cgroup, file)
	if own == rootFile || !strings.HasPrefix(own, mount+"/") || !fs.ValidPath(own) {
		return []string{rootFile}
	}
	return []string{own, rootFile}
}

// parseLimit reads a limit file: "max" (v2) is no limit, as is a v1 value of 2^62 or more; else a
// positive number of bytes.
func parseLimit(data []byte, v1 bool) (int64, error) {
	s := strings.TrimSpace(string(data))
	if s == "max" && !v1 {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if v1 {
			return 0, fmt.Errorf("%q is not a number of bytes", s)
		}
		return 0, fmt.Errorf("%q is neither \"max\" nor a number of bytes", s)
	}
	if n <= 0 {
		return 0, fmt.Errorf("%d is not a positive number of bytes", n)
	}
	if v1 && n >= v1Unlimited {
		return 0, nil
	}
	return n, nil
}

// readSmall reads at most maxFileSize bytes of name; a longer file is an error.
func readSmall(root fs.FS, name string) ([]byte, error) {
	f, err := root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("%s: longer than %d bytes", name, maxFileSize)
	}
	return data, nil
}

// GCPercentEnv is the variable that, when set, decides the collector's pace alone.
const GCPercentEnv = "GOGC"

// DefaultGCPercent sets the collector's pace to percent unless GOGC is set: for the binaries whose
// heap is mostly lists they read (the controller's caches, doctor's audit), Go's default of 100
// lets the garbage of decoding them double the peak. It reports whether it set the pace.
func DefaultGCPercent(percent int) bool {
	if os.Getenv(GCPercentEnv) != "" {
		return false
	}
	debug.SetGCPercent(percent)
	return true
}

// DefaultSoftLimit sets the runtime's soft memory limit to bytes unless GOMEMLIMIT is set, and
// reports whether it did: for a command-line tool, which no cgroup limit sizes, that keeps the
// collector's headroom from carrying the peak well past the live heap. Soft: past it the
// collector works harder (at most half the CPU, Go's own cap), the process is never stopped.
func DefaultSoftLimit(bytes int64) bool {
	if os.Getenv(Env) != "" {
		return false
	}
	debug.SetMemoryLimit(bytes)
	return true
}
