// Package docs reads what README.md lists (flags, fuzz targets) so that tests can hold the lists
// to the code: a flag added without a row, or a row left after its flag went, fails a test instead
// of misleading a new user.
package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var (
	flagName   = regexp.MustCompile("--[a-z0-9][a-z0-9-]*")
	fuzzTarget = regexp.MustCompile(`\bFuzz[A-Z][A-Za-z0-9]*\b`)
	fuzzFunc   = regexp.MustCompile(`(?m)^func (Fuzz[A-Z][A-Za-z0-9]*)\(`)
)

// Section returns the part of markdown under the heading line given, up to the next heading of
// the same or a higher level.
func Section(markdown, heading string) (string, error) {
	level := len(heading) - len(strings.TrimLeft(heading, "#"))
	var out strings.Builder
	in := false
	sc := bufio.NewScanner(strings.NewReader(markdown))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if in {
			if h := len(line) - len(strings.TrimLeft(line, "#")); h > 0 && h <= level && strings.HasPrefix(line[h:], " ") {
				break
			}
			out.WriteString(line)
			out.WriteByte('\n')
			continue
		}
		in = line == heading
	}
	if !in {
		return "", fmt.Errorf("no heading %q", heading)
	}
	return out.String(), nil
}

// TableFlags returns the flags named in the first cell of each table row of section.
func TableFlags(section string) []string {
	var out []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.TrimSpace(cells[0]) != "" {
			continue
		}
		out = append(out, flagName.FindAllString(cells[1], -1)...)
	}
	return sorted(out)
}

// Paragraph returns the paragraph of markdown that starts with prefix ("" when none does).
func Paragraph(markdown, prefix string) string {
	for _, p := range strings.Split(markdown, "\n\n") {
		if strings.HasPrefix(strings.TrimSpace(p), prefix) {
			return p
		}
	}
	return ""
}

// Flags returns the flags named anywhere in text.
func Flags(text string) []string { return sorted(flagName.FindAllString(text, -1)) }

// FuzzTargetsNamed returns the fuzz targets named in text.
func FuzzTargetsNamed(text string) []string { return sorted(fuzzTarget.FindAllString(text, -1)) }

// FuzzTargets returns the fuzz targets defined in the module's tests under root, as
// "./<package dir>:<target>".
func FuzzTargets(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		for _, m := range fuzzFunc.FindAllStringSubmatch(string(b), -1) {
			out = append(out, "./"+filepath.ToSlash(rel)+":"+m[1])
		}
		return nil
	})
	return sorted(out), err
}

// Missing returns the entries of want that are not in have.
func Missing(want, have []string) []string {
	in := map[string]bool{}
	for _, h := range have {
		in[h] = true
	}
	var out []string
	for _, w := range want {
		if !in[w] {
			out = append(out, w)
		}
	}
	return out
}

func sorted(s []string) []string {
	seen := map[string]bool{}
	out := s[:0:0]
	for _, x := range s {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Strings(out)
	return out
}

// helpFlag is a flag's line in the help a binary prints (flag.PrintDefaults).
var helpFlag = regexp.MustCompile(`(?m)^  (--?[a-z0-9][a-z0-9-]*)`)

// UndocumentedFlags compares the flags a binary's help lists with README.md: the section under
// heading and the paragraph starting with common (the flags every binary takes). It returns the
// flags of the help that README.md never names there (a name ending in "-", as `--zap-*`, names a
// prefix), and the flags of the section's table that the help does not list.
func UndocumentedFlags(help, readme, heading, common string) (undocumented, gone []string, err error) {
	section, err := Section(readme, heading)
	if err != nil {
		return nil, nil, err
	}
	named := Flags(section + "\n" + Paragraph(readme, common))
	var listed []string
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		listed = append(listed, "--"+strings.TrimLeft(m[1], "-"))
	}
	listed = sorted(listed)
	for _, f := range listed {
		ok := false
		for _, n := range named {
			if f == n || (strings.HasSuffix(n, "-") && strings.HasPrefix(f, n)) {
				ok = true
				break
			}
		}
		if !ok && f != "--help" {
			undocumented = append(undocumented, f)
		}
	}
	return undocumented, Missing(TableFlags(section), listed), nil
}
