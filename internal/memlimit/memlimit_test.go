package memlimit

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/go-logr/logr/funcr"
)

const (
	mi256 = int64(256 << 20)
	mi128 = int64(128 << 20)
)

func files(kv ...string) fstest.MapFS {
	m := fstest.MapFS{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = &fstest.MapFile{Data: []byte(kv[i+1])}
	}
	return m
}

// Choose over fake roots: the explicit GOMEMLIMIT wins, cgroup v2 and v1 (and both at once)
// are read where a container finds its own cgroup, "no limit" in each spelling sets none, and a
// malformed file is a clear error with no limit set, never a panic.
// Fails before the fix (issue 32, item 3): neither binary read the cgroup's limit, so without
// GOMEMLIMIT the Go runtime had no memory limit at all.
func TestChoose(t *testing.T) {
	v2 := func(memoryMax string) fstest.MapFS {
		return files("proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", memoryMax)
	}
	for _, tc := range []struct {
		name    string
		env     string
		root    fstest.MapFS
		source  string
		limit   int64 // Choice.Limit
		cgroup  int64 // Choice.Cgroup
		file    string
		wantErr string // a substring of Choice.Err
	}{
		{name: "GOMEMLIMIT wins", env: "200MiB", root: v2("268435456\n"), source: FromEnv},
		{name: "GOMEMLIMIT=off wins", env: "off", root: v2("268435456\n"), source: FromEnv},
		{name: "GOMEMLIMIT wins over malformed files", env: "1GiB", root: files("proc/self/cgroup", "garbage"), source: FromEnv},
		{name: "v2 in a cgroup namespace", root: v2("268435456\n"), source: FromCgroup,
			limit: 241591910, cgroup: mi256, file: "sys/fs/cgroup/memory.max"},
		{name: "v2 max is no limit", root: v2("max\n"), source: NoLimit, file: "sys/fs/cgroup/memory.max"},
		{name: "v2 the cgroup's own file under the mount", source: FromCgroup, limit: 120795955, cgroup: mi128,
			file: "sys/fs/cgroup/kubepods.slice/pod-a/cri-b.scope/memory.max",
			root: files("proc/self/cgroup", "0::/kubepods.slice/pod-a/cri-b.scope\n",
				"sys/fs/cgroup/kubepods.slice/pod-a/cri-b.scope/memory.max", "134217728\n",
				"sys/fs/cgroup/memory.max", "268435456\n")},
		{name: "v2 own path not mounted: the mount's root is the container's", source: FromCgroup,
			limit: 241591910, cgroup: mi256, file: "sys/fs/cgroup/memory.max",
			root: files("proc/self/cgroup", "0::/kubepods.slice/pod-a/cri-b.scope\n", "sys/fs/cgroup/memory.max", "268435456")},
		{name: "v2 a path outside the namespace's root is not followed", source: FromCgroup,
			limit: 241591910, cgroup: mi256, file: "sys/fs/cgroup/memory.max",
			root: files("proc/self/cgroup", "0::/../../etc\n", "etc/memory.max", "1", "sys/fs/cgroup/memory.max", "268435456")},
		{name: "v2 the host's root cgroup has no memory.max", root: files("proc/self/cgroup", "0::/\n"), source: NoLimit},
		{name: "v1 memory controller", source: FromCgroup, limit: 483183820, cgroup: 512 << 20,
			file: "sys/fs/cgroup/memory/memory.limit_in_bytes",
			root: files("proc/self/cgroup", "12:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n1:name=systemd:/docker/abc\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes", "536870912\n")},
		{name: "v1 memory among other controllers", source: FromCgroup, limit: 120795955, cgroup: mi128,
			file: "sys/fs/cgroup/memory/memory.limit_in_bytes",
			root: files("proc/self/cgroup", "5:cpuacct,memory:/x\n", "sys/fs/cgroup/memory/memory.limit_in_bytes", "134217728")},
		{name: "v1 unlimited", source: NoLimit, file: "sys/fs/cgroup/memory/process_api/52fb/memory.limit_in_bytes",
			root: files("proc/self/cgroup", "4:memory:/process_api/52fb\n0::/\n",
				"sys/fs/cgroup/memory/process_api/52fb/memory.limit_in_bytes", "9223372036854771712\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n")},
		{name: "hybrid: v1's memory controller wins over the v2 line", source: FromCgroup, limit: 120795955, cgroup: mi128,
			file: "sys/fs/cgroup/memory/a/memory.limit_in_bytes",
			root: files("proc/self/cgroup", "0::/\n4:memory:/a\n",
				"sys/fs/cgroup/memory/a/memory.limit_in_bytes", "134217728",
				"sys/fs/cgroup/memory.max", "268435456")},
		{name: "no memory controller, no v2 line", root: files("proc/self/cgroup", "3:cpu:/x\n"), source: NoLimit},
		{name: "no /proc (not Linux)", root: files(), source: NoLimit},
		{name: "a limit of 10 bytes still leaves one", root: v2("10"), source: FromCgroup, limit: 9, cgroup: 10, file: "sys/fs/cgroup/memory.max"},

		{name: "malformed /proc/self/cgroup line", root: files("proc/self/cgroup", "garbage\n"), source: NoLimit,
			file: "proc/self/cgroup", wantErr: `line 1: "garbage" is not hierarchy:controllers:path`},
		{name: "malformed hierarchy ID", root: files("proc/self/cgroup", "0::/\nx:memory:/a\n"), source: NoLimit,
			file: "proc/self/cgroup", wantErr: `line 2: hierarchy ID "x" is not a number`},
		{name: "relative cgroup path", root: files("proc/self/cgroup", "0::kubepods\n"), source: NoLimit,
			file: "proc/self/cgroup", wantErr: `cgroup path "kubepods" is not absolute`},
		{name: "oversized /proc/self/cgroup", root: files("proc/self/cgroup", strings.Repeat("0::/\n", 20000)), source: NoLimit,
			file: "proc/self/cgroup", wantErr: "longer than 65536 bytes"},
		{name: "v2 empty memory.max", root: v2(""), source: NoLimit, file: "sys/fs/cgroup/memory.max",
			wantErr: `sys/fs/cgroup/memory.max: "" is neither "max" nor a number of bytes`},
		{name: "v2 memory.max with a unit", root: v2("256Mi\n"), source: NoLimit, file: "sys/fs/cgroup/memory.max",
			wantErr: `"256Mi" is neither "max" nor a number of bytes`},
		{name: "v2 memory.max overflowing int64", root: v2("99999999999999999999"), source: NoLimit, file: "sys/fs/cgroup/memory.max",
			wantErr: "is neither"},
		{name: "v2 memory.max zero", root: v2("0\n"), source: NoLimit, file: "sys/fs/cgroup/memory.max",
			wantErr: "0 is not a positive number of bytes"},
		{name: "v2 memory.max negative", root: v2("-1"), source: NoLimit, file: "sys/fs/cgroup/memory.max",
			wantErr: "-1 is not a positive number of bytes"},
		{name: "v1 max is v2's spelling", source: NoLimit, file: "sys/fs/cgroup/memory/memory.limit_in_bytes",
			root:    files("proc/self/cgroup", "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes", "max"),
			wantErr: `"max" is not a number of bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getenv := func(k string) string {
				if k == Env {
					return tc.env
				}
				return ""
			}
			c := Choose(getenv, tc.root)
			if c.Source != tc.source || c.Limit != tc.limit || c.Cgroup != tc.cgroup || c.File != tc.file {
				t.Errorf("Choose = %+v, want source %s, limit %d, cgroup %d, file %q", c, tc.source, tc.limit, tc.cgroup, tc.file)
			}
			if tc.source == FromEnv && c.Env != tc.env {
				t.Errorf("Env %q, want %q", c.Env, tc.env)
			}
			switch {
			case tc.wantErr == "" && c.Err != nil:
				t.Errorf("error %v, want none", c.Err)
			case tc.wantErr != "" && (c.Err == nil || !strings.Contains(c.Err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", c.Err, tc.wantErr)
			}
			if c.Source != FromCgroup && c.Limit != 0 {
				t.Errorf("a limit %d to set from source %s", c.Limit, c.Source)
			}
		})
	}
}

// The limit is Percent of the cgroup's, rounded down, without overflow near int64's end.
func TestChooseRoundsDown(t *testing.T) {
	for _, tc := range []struct {
		cgroup string
		want   int64
	}{
		{"1", 0}, {"100", 90}, {"101", 90}, {"109", 98}, {"4611686018427387903", 4150517416584649112},
	} {
		root := files("proc/self/cgroup", "0::/\n", "sys/fs/cgroup/memory.max", tc.cgroup)
		c := Choose(func(string) string { return "" }, root)
		if c.Limit != tc.want {
			t.Errorf("cgroup limit %s: limit %d, want %d", tc.cgroup, c.Limit, tc.want)
		}
	}
}

// Each choice is one line; a choice nobody made writes nothing.
func TestLog(t *testing.T) {
	for _, tc := range []struct {
		c    Choice
		want string
	}{
		{Choice{}, ""},
		{Choice{Source: FromEnv, Env: "200MiB"}, `"msg"="Go memory limit from GOMEMLIMIT" "GOMEMLIMIT"="200MiB"`},
		{Choice{Source: FromCgroup, Limit: 90, Cgroup: 100, File: "sys/fs/cgroup/memory.max"},
			`"msg"="Go memory limit set to 90% of the cgroup's memory limit (GOMEMLIMIT unset)" "limit"=90 "cgroupLimit"=100 "file"="/sys/fs/cgroup/memory.max"`},
		{Choice{Source: NoLimit, File: "sys/fs/cgroup/memory.max"},
			`"msg"="no Go memory limit: GOMEMLIMIT is unset and the cgroup sets no memory limit" "file"="/sys/fs/cgroup/memory.max"`},
		{Choice{Source: NoLimit}, `"msg"="no Go memory limit: GOMEMLIMIT is unset and no cgroup memory limit file was found"`},
		{Choice{Source: NoLimit, Err: errors.New("bad file")},
			`"msg"="no Go memory limit: GOMEMLIMIT is unset and the cgroup's memory limit is unreadable" "error"="bad file"`},
	} {
		var lines []string
		log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
		tc.c.Log(log)
		if got := strings.Join(lines, "\n"); !strings.Contains(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("%+v logged %q, want %q", tc.c, got, tc.want)
		}
	}
}

// Apply with GOMEMLIMIT set leaves the runtime's limit as the runtime set it.
func TestApplyLeavesAnExplicitLimit(t *testing.T) {
	t.Setenv(Env, "off")
	before := debug.SetMemoryLimit(-1)
	if c := Apply(); c.Source != FromEnv || c.Env != "off" {
		t.Errorf("Apply = %+v, want source %s", c, FromEnv)
	}
	if after := debug.SetMemoryLimit(-1); after != before {
		t.Errorf("the runtime's memory limit changed from %d to %d", before, after)
	}
}

// DefaultSoftLimit sets the soft limit only when GOMEMLIMIT is unset: an operator's GOMEMLIMIT,
// "off" included, always wins.
func TestDefaultSoftLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv(Env, "")
	if !DefaultSoftLimit(123 << 20) {
		t.Fatal("GOMEMLIMIT unset: limit not set")
	}
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Errorf("limit %d, want %d", got, 123<<20)
	}
	for _, v := range []string{"off", "1GiB"} {
		t.Setenv(Env, v)
		before := debug.SetMemoryLimit(-1)
		if DefaultSoftLimit(7 << 20) {
			t.Errorf("GOMEMLIMIT=%s: limit set anyway", v)
		}
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("GOMEMLIMIT=%s: limit changed to %d", v, got)
		}
	}
}

// DefaultGCPercent sets the pace only when GOGC is unset: an operator's GOGC always wins.
func TestDefaultGCPercent(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	t.Setenv(GCPercentEnv, "")
	if !DefaultGCPercent(37) {
		t.Fatal("GOGC unset: pace not set")
	}
	if got := debug.SetGCPercent(100); got != 37 {
		t.Errorf("pace %d, want 37", got)
	}
	t.Setenv(GCPercentEnv, "200")
	if DefaultGCPercent(37) {
		t.Error("GOGC=200: pace set anyway")
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=200: pace changed to %d", got)
	}
}
