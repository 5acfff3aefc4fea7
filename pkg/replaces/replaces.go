// Package replaces knows when a CSV's spec.replaces chain closes a cycle: the CSV replaces
// itself, or replaces a CSV of its namespace whose own chain leads back to it (OCPBUGS-23954,
// OLM #3891). olm-operator's ClusterOperator status handler (GetFinalCSVInReplacing, the same
// from OLM v0.25.0 to v0.46.0 and in OpenShift 4.16-4.20) walks from a CSV to the CSV that
// replaces it with no visited set: a CSV in such a cycle spins a CSV queue worker at 100 % CPU
// until olm-operator restarts, and deleting the CSV does not stop it. The decisions here are
// pure: the webhook refuses or warns about a CSV that would close a cycle, and doctor reports
// the cycles already there.
//
// Every name here is a tenant's: a CSV's name, and its spec.replaces, which may be any string.
// Walks are bounded (MaxWalk) and keep a visited set, so no graph a tenant builds makes them loop
// or run long.
package replaces

import (
	"fmt"
	"sort"
	"strings"
)

// MaxWalk is the most CSVs a walk from one CSV follows through its namespace before it gives up
// undecided. An upgrade chain OLM leaves in a namespace is short (OLM deletes a replaced CSV once
// its successor succeeds), so a longer chain is a tenant's; past the bound the webhook admits
// with a warning and doctor's check still finds the cycle.
const MaxWalk = 100

// Lookup returns the spec.replaces of the CSV named name in the namespace, and whether such a
// CSV takes part in OLM's walk (it exists and is not one of OLM's copies: OLM's walk skips
// copies, olm.IsCopiedCSV). An error ends the walk undecided.
type Lookup func(name string) (replaces string, found bool, err error)

// Result is what a walk from one CSV found.
type Result struct {
	// Cycle is the chain from the CSV back to itself, in replaces order: Cycle[0] is the CSV,
	// Cycle[i+1] is what Cycle[i] replaces, and Cycle[len-1] replaces Cycle[0]. One element for a
	// self-reference; nil when the CSV is in no cycle.
	Cycle []string
	// Undecided is set when the walk reached MaxWalk steps before the chain ended or returned.
	Undecided bool
}

// Walk follows spec.replaces from the CSV named name, whose spec.replaces is replaces, through
// the namespace's CSVs as lookup gives them (lookup is never asked for name itself: the CSV's own
// replaces is the one given, which on an update is the new one). It reports a cycle only when the
// chain comes back to name. A chain that runs into a cycle of other CSVs is not this CSV's
// doing: OLM's walk from this CSV follows the CSVs that replace it, never enters that cycle, and
// the CSVs of that cycle are reported on their own (by doctor, or when they were written).
// A CSV without a name (generateName on a create) cannot be named by any replaces.
func Walk(name, replaces string, lookup Lookup) (Result, error) {
	if name == "" || replaces == "" {
		return Result{}, nil
	}
	chain := []string{name}
	visited := map[string]bool{name: true}
	next := replaces
	for steps := 0; ; steps++ {
		if next == name {
			return Result{Cycle: chain}, nil
		}
		if next == "" || visited[next] {
			return Result{}, nil // the chain ends, or loops among other CSVs
		}
		if steps >= MaxWalk {
			return Result{Undecided: true}, nil
		}
		r, found, err := lookup(next)
		if err != nil {
			return Result{}, err
		}
		if !found {
			return Result{}, nil
		}
		visited[next] = true
		chain = append(chain, next)
		next = r
	}
}

// Find is Walk through a namespace's CSVs given as a map from name to spec.replaces (copies left
// out by the caller). others may hold name itself; its entry is not read.
func Find(name, replaces string, others map[string]string) Result {
	r, _ := Walk(name, replaces, MapLookup(others))
	return r
}

// MapLookup looks names up in a map from CSV name to spec.replaces.
func MapLookup(csvs map[string]string) Lookup {
	return func(name string) (string, bool, error) {
		r, ok := csvs[name]
		return r, ok, nil
	}
}

// Cycles returns every cycle among a namespace's CSVs (name to spec.replaces, copies left out),
// each once, rotated to start at its least name, ordered by that name. Each CSV is walked with
// Walk's bound; a cycle longer than MaxWalk is not reported.
func Cycles(csvs map[string]string) [][]string {
	names := make([]string, 0, len(csvs))
	for n := range csvs {
		names = append(names, n)
	}
	sort.Strings(names)
	inCycle := map[string]bool{}
	var out [][]string
	for _, n := range names {
		if inCycle[n] {
			continue
		}
		r := Find(n, csvs[n], csvs)
		if r.Cycle == nil {
			continue
		}
		for _, m := range r.Cycle {
			inCycle[m] = true
		}
		out = append(out, rotate(r.Cycle))
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// rotate starts a cycle at its least name, keeping its order.
func rotate(cycle []string) []string {
	least := 0
	for i, n := range cycle {
		if n < cycle[least] {
			least = i
		}
	}
	return append(append([]string{}, cycle[least:]...), cycle[:least]...)
}

// maxShown is how many names a description of a cycle spells out.
const maxShown = 6

// Describe spells a cycle out for a message: "a replaces a" for a self-reference, else
// "a replaces b, b replaces c, c replaces a", at most maxShown links and then how many more.
// The names are the tenant's, unescaped: the caller escapes what it prints.
func Describe(cycle []string) string {
	if len(cycle) == 0 {
		return ""
	}
	var links []string
	for i, n := range cycle {
		if i == maxShown {
			links = append(links, fmt.Sprintf("and %d more", len(cycle)-maxShown))
			break
		}
		links = append(links, n+" replaces "+cycle[(i+1)%len(cycle)])
	}
	return strings.Join(links, ", ")
}

// Reference is what every message about a cycle cites.
const Reference = "OCPBUGS-23954, OLM #3891"

// Recovery is what ends the loop once a cycle exists (olm-operator keeps spinning after the
// cycle is broken, until it restarts).
const Recovery = "set spec.replaces of one of them to the CSV it really replaces (or remove it), or delete the CSV, then restart olm-operator: deleting the CSV alone does not stop the loop"
