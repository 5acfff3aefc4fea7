// Package version is what olmguard's binaries say they are: the release version and the commit,
// stamped at build time by `make dist` (and `make build`) with
//
//	-ldflags "-X github.com/olmguard/olmguard/internal/version.version=v0.2.0 -X ...version.commit=<sha>"
//
// A binary built without them (go build, go install) still names its commit when the build
// recorded one (Go stamps vcs.revision from a git checkout).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker; see the package comment.
var (
	version = ""
	commit  = ""
)

// Info is one binary's version.
type Info struct {
	Version, Commit, Go, Platform string
	Modified                      bool // built from a tree with uncommitted changes
}

// Get returns the stamped version, or what the Go build recorded when nothing was stamped.
func Get() Info { return get(version, commit, debug.ReadBuildInfo) }

func get(v, c string, read func() (*debug.BuildInfo, bool)) Info {
	i := Info{Version: v, Commit: c, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := read(); ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version // go install ...@v0.2.0
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && i.Commit == "":
				i.Commit = s.Value
			case s.Key == "vcs.modified" && s.Value == "true" && c == "":
				i.Modified = true
			}
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}

// String is the one line --version prints, e.g.
// "olmguard-webhook v0.2.0 (commit 0b7fb59c1d2e, go1.26.0, linux/amd64)".
func (i Info) String(program string) string {
	c := i.Commit
	if len(c) > 12 {
		c = c[:12]
	}
	if i.Modified {
		c += ", modified"
	}
	return fmt.Sprintf("%s %s (commit %s, %s, %s)", program, i.Version, c, i.Go, i.Platform)
}
