package doctor

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the report for people: one row per finding with its evidence and fix, then a
// summary.
func WriteTable(w io.Writer, r *Report) error {
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "warning: skipped %s\n", s)
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
		fmt.Fprintf(tw, "%s\t%s\t%s/%s\t%s\t%s\n", f.Class, ns, strings.ToLower(f.Kind), f.Name, oneLine(problem), oneLine(f.Fix))
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

func checkedSummary(checked map[string]int) string {
	parts := make([]string, 0, len(checked))
	for k, n := range checked {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(parts)
	return "checked " + strings.Join(parts, ", ")
}

// oneLine keeps a table row on one line whatever a message holds.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
