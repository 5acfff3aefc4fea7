package doctor

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/internal/shellquote"
)

// AssertCommands checks the property every finding's commands hold: each parses, as a POSIX
// shell reads it, into exactly one simple command whose first word is kubectl (shellquote.Split
// refuses operators, expansions, globs and newlines outside quotes), sh itself parses it into the
// same words, and it holds no character a terminal acts on. Every test of this package that
// makes findings runs it on them (checks, wants, the audit tests).
func AssertCommands(t testing.TB, fs []Finding) {
	t.Helper()
	sh, _ := exec.LookPath("sh")
	for _, f := range fs {
		for _, c := range f.Commands {
			words, err := shellquote.Split(c)
			if err != nil || words[0] != "kubectl" {
				t.Errorf("%s %s/%s: command %q is not one kubectl invocation: %q, %v", f.Check, f.Namespace, f.Name, c, words, err)
				continue
			}
			if printable.Escape(c) != c {
				t.Errorf("%s %s/%s: command %q holds control characters", f.Check, f.Namespace, f.Name, c)
			}
			if sh == "" {
				continue
			}
			out, err := exec.Command(sh, "-c", `eval "set -- $1"; for a; do printf '%s\0' "$a"; done`, "_", c).Output()
			if got := strings.Split(string(out), "\x00"); err != nil || !slices.Equal(got[:len(got)-1], words) {
				t.Errorf("%s %s/%s: sh parses %q into %q (%v), not %q", f.Check, f.Namespace, f.Name, c, got, err, words)
			}
		}
	}
}
