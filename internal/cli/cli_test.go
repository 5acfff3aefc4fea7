package cli

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/olmguard/olmguard/internal/flags"
)

// A former flag name still works, and the command logs that it is deprecated once its flags are
// valid; a bad value under it is still a one-line bad flag (fails before the fix: Main logged
// nothing). The kubeconfig is missing, so that Main stops (exit 1) right after the warning:
// controller-runtime's signal handler can be set up once per process only.
func TestDeprecatedFlagIsLogged(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "missing")
	const warning = "--old-ttl is deprecated and will be removed: use --new-ttl"
	for name, tc := range map[string]struct {
		args       []string
		wantCode   int
		want       time.Duration
		wantStderr string // the whole of stderr; "" : not checked
		warned     bool   // stderr has the deprecation warning
	}{
		"new name":          {args: []string{"--new-ttl=2m"}, wantCode: 1, want: 2 * time.Minute},
		"former name":       {args: []string{"--old-ttl=3m"}, wantCode: 1, want: 3 * time.Minute, warned: true},
		"former, bad value": {args: []string{"--old-ttl=3s"}, wantCode: 2, wantStderr: "t: invalid value \"3s\" for flag --old-ttl: --old-ttl 3s must be at least 1m0s (see --help)\n"},
	} {
		t.Run(name, func(t *testing.T) {
			ttl := time.Minute
			d := flags.Duration{Name: "new-ttl", Former: "old-ttl", Least: time.Minute, Usage: "how long"}
			var stdout, stderr bytes.Buffer
			code := Command{Name: "t", About: "a test",
				Bind:     func(fs *flag.FlagSet) { d.Bind(fs, &ttl) },
				Validate: func() error { return d.Check(ttl) },
				Run:      func(context.Context, *rest.Config) error { return nil },
			}.Main(append(tc.args, "--kubeconfig="+kubeconfig), &stdout, &stderr)
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.wantCode, stderr.String())
			}
			if tc.wantStderr != "" && stderr.String() != tc.wantStderr {
				t.Errorf("stderr %q, want %q", stderr.String(), tc.wantStderr)
			}
			if code != 2 && ttl != tc.want {
				t.Errorf("parsed %s, want %s", ttl, tc.want)
			}
			if got := strings.Contains(stderr.String(), warning); got != tc.warned {
				t.Errorf("warned %v, want %v; stderr %s", got, tc.warned, stderr.String())
			}
		})
	}
}

// --help shows the former name with its type and default, naming the new one.
func TestHelpShowsFormerName(t *testing.T) {
	ttl := time.Minute
	var stdout, stderr bytes.Buffer
	code := Command{Name: "t", About: "a test", Bind: func(fs *flag.FlagSet) {
		flags.Duration{Name: "new-ttl", Former: "old-ttl", Least: time.Minute, Usage: "how long"}.Bind(fs, &ttl)
	}}.Main([]string{"--help"}, &stdout, &stderr)
	want := "  --old-ttl duration\n    \tdeprecated former name of --new-ttl (same duration) (default 1m0s)\n"
	if code != 0 || !strings.Contains(stdout.String(), want) {
		t.Errorf("exit %d, help:\n%s\nwant %q", code, stdout.String(), want)
	}
}
