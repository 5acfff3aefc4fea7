package docs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/olmguard/olmguard/test/supportmatrix"
)

const root = "../.."

func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every fuzz target of the tree is named in README.md's list and run by make fuzz, and neither
// names one that is gone. Fails without the four targets added to both lists in this change.
func TestEveryFuzzTargetIsListedAndRun(t *testing.T) {
	code, err := FuzzTargets(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(code) == 0 {
		t.Fatal("no fuzz target found")
	}
	var names []string
	for _, c := range code {
		names = append(names, c[strings.Index(c, ":")+1:])
	}
	listed := FuzzTargetsNamed(Paragraph(read(t, "README.md"), "Fuzz targets:"))
	if m := Missing(names, listed); len(m) > 0 {
		t.Errorf("README.md's fuzz targets lack %v", m)
	}
	if m := Missing(listed, names); len(m) > 0 {
		t.Errorf("README.md lists fuzz targets that do not exist: %v", m)
	}
	run := makeList(t, "FUZZ_TARGETS")
	if m := Missing(code, run); len(m) > 0 {
		t.Errorf("make fuzz does not run %v", m)
	}
	if m := Missing(run, code); len(m) > 0 {
		t.Errorf("make fuzz names targets that do not exist: %v", m)
	}
}

// makeList returns the words of the Makefile variable name, continued lines included.
func makeList(t *testing.T, name string) []string {
	t.Helper()
	var words []string
	in := false
	for _, line := range strings.Split(read(t, "Makefile"), "\n") {
		if !in {
			rest, ok := strings.CutPrefix(line, name+" :=")
			if !ok {
				continue
			}
			line, in = rest, true
		}
		more := strings.HasSuffix(line, "\\")
		words = append(words, strings.Fields(strings.TrimSuffix(line, "\\"))...)
		if !more {
			return words
		}
	}
	if !in {
		t.Fatalf("no %s in the Makefile", name)
	}
	return words
}

func TestSectionAndTableFlags(t *testing.T) {
	md := "## A\n\n### One\n\n| Flag | Default |\n|---|---|\n| `--a`, `--b` | `1` mentions `--not-a-flag-cell` |\n\nText `--c`.\n\n### Two\n\n| `--d` | x |\n## B\n"
	s, err := Section(md, "### One")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(TableFlags(s), " "); got != "--a --b" {
		t.Errorf("TableFlags = %q", got)
	}
	if got := strings.Join(Flags(s), " "); got != "--a --b --c --not-a-flag-cell" {
		t.Errorf("Flags = %q", got)
	}
	if _, err := Section(md, "### Three"); err == nil {
		t.Error("a missing heading found")
	}
}

// README.md's support matrix is what make support-matrix renders from the tier's recorded
// results (docs/support-matrix.jsonl), not a table written by hand: fails when either changed
// without the other.
func TestSupportMatrixIsGenerated(t *testing.T) {
	f, err := os.Open(filepath.Join(root, "docs", "support-matrix.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	results, err := supportmatrix.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := supportmatrix.Section(read(t, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := supportmatrix.Render(results); got != want {
		t.Errorf("README.md's support matrix is not the one docs/support-matrix.jsonl renders (run make support-matrix):\n got:\n%s\nwant:\n%s", got, want)
	}
}
