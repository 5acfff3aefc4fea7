package docs

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// CheckFlagsDocumented fails t when the help that run prints for --help lists a flag README.md
// (at readme) leaves out of the section under heading and the paragraph every binary shares, or
// when that section's table names a flag the help does not list. what names the binary in errors.
func CheckFlagsDocumented(t testing.TB, run func(args []string, stdout, stderr io.Writer) int, readme, heading, what string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{"--help"}, &out, &errOut); code != 0 {
		t.Fatalf("--help: exit %d: %s", code, errOut.String())
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	undocumented, gone, err := UndocumentedFlags(out.String()+errOut.String(), string(b), heading, "Both binaries also take")
	if err != nil {
		t.Fatal(err)
	}
	if len(undocumented) > 0 || len(gone) > 0 {
		t.Errorf("README.md's %s flags: not documented %v; documented but gone %v", what, undocumented, gone)
	}
}
