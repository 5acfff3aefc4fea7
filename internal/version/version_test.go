package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	recorded := func(main string, settings ...debug.BuildSetting) func() (*debug.BuildInfo, bool) {
		return func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Version: main}, Settings: settings}, true
		}
	}
	rev := debug.BuildSetting{Key: "vcs.revision", Value: "0123456789abcdef0123"}
	dirty := debug.BuildSetting{Key: "vcs.modified", Value: "true"}
	for _, tc := range []struct {
		name, version, commit string
		read                  func() (*debug.BuildInfo, bool)
		want                  string
	}{
		{"stamped wins over the build's record", "v0.2.0", "feedbeef", recorded("(devel)", rev, dirty), "p v0.2.0 (commit feedbeef,"},
		{"go build from a checkout", "", "", recorded("(devel)", rev), "p dev (commit 0123456789ab,"},
		{"go build from a modified checkout", "", "", recorded("(devel)", rev, dirty), "p dev (commit 0123456789ab, modified,"},
		{"go install at a version", "", "", recorded("v0.3.1"), "p v0.3.1 (commit unknown,"},
		{"no build info", "", "", func() (*debug.BuildInfo, bool) { return nil, false }, "p dev (commit unknown,"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := get(tc.version, tc.commit, tc.read).String("p")
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start with %q", got, tc.want)
			}
		})
	}
}
