package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/internal/printable"
)

// WriteTable prints the report for people: one row per finding with its evidence and fix, each
// command of the fix on a line of its own under it, then a summary. Every field is one line with
// its control characters escaped (printable.Line): names, messages and addresses come from the
// cluster, where a tenant may have written escape sequences a terminal would act on.
func WriteTable(w io.Writer, r *Report) error {
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "warning: skipped %s\n", printable.Line(s))
	}
	if len(r.Findings) == 0 {
		_, err := fmt.Fprintf(w, "No problems found (%s).\n", checkedSummary(r.Checked))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLASS\tNAMESPACE\tOBJECT\tPROBLEM\tFIX")
	for _, f := range r.Findings {
		ns := f.Namespace
		if ns == "" {
			ns = "-"
		}
		problem := f.Problem
		if f.Evidence != "" {
			problem += " [evidence: " + f.Evidence + "]"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\n", printable.Line(string(f.Class)), printable.Line(ns),
			printable.Line(strings.ToLower(f.Kind)), printable.Line(f.Name), printable.Line(problem), printable.Line(f.Fix))
		for _, c := range f.Commands {
			fmt.Fprintf(tw, "\t\t\t\t  %s\n", printable.Line(c))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	counts := map[Class]int{}
	for _, f := range r.Findings {
		counts[f.Class]++
	}
	classes := make([]string, 0, len(counts))
	for c, n := range counts {
		classes = append(classes, fmt.Sprintf("%s: %d", c, n))
	}
	sort.Strings(classes)
	_, err := fmt.Fprintf(w, "\n%d problem(s) found (%s); %s.\n", len(r.Findings), strings.Join(classes, ", "), checkedSummary(r.Checked))
	return err
}

// WriteJSON prints the report for scripts.
func WriteJSON(w io.Writer, r *Report) error {
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteYAML prints the report for scripts as WriteJSON does, in YAML: the same fields, names and
// values (converted from its JSON). A string holding a character YAML does not print (ESC, the
// other controls) is written double-quoted with that character escaped, and reads back exact.
func WriteYAML(w io.Writer, r *Report) error {
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	js, err := json.Marshal(r)
	if err != nil {
		return err
	}
	// encoding/json leaves DEL and the C1 controls raw, which a YAML parser refuses: escaped, as
	// JSON allows, they reach the YAML as what they are.
	var esc strings.Builder
	for _, c := range string(js) {
		if c == 0x7f || c >= 0x80 && c <= 0x9f {
			fmt.Fprintf(&esc, `\u%04x`, c)
			continue
		}
		esc.WriteRune(c)
	}
	out, err := yaml.JSONToYAML([]byte(esc.String()))
	if err != nil {
		return err
	}
	_, err = w.Write(out)
	return err
}

func checkedSummary(checked map[string]int) string {
	parts := make([]string, 0, len(checked))
	for k, n := range checked {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return "checked " + strings.Join(parts, ", ")
}
