// Package layers states which of olmguard's packages may import which (docs/architecture.md) and
// checks an import graph against it. The rules keep the knowledge of each failure class in one
// package that every consumer imports, and keep the kubectl plugin free of the controller.
package layers

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Module is olmguard's module path; patterns and graphs use paths relative to it.
const Module = "github.com/olmguard/olmguard"

// Pattern matches package paths relative to the module: "pkg/x" matches that package only,
// "pkg/x/..." it and every package below it, "pkg/x/*" only the packages below it.
type Pattern string

func (p Pattern) matches(pkg string) bool {
	s := string(p)
	switch {
	case strings.HasSuffix(s, "/..."):
		base := strings.TrimSuffix(s, "/...")
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	case strings.HasSuffix(s, "/*"):
		return strings.HasPrefix(pkg, strings.TrimSuffix(s, "*"))
	}
	return pkg == s
}

func anyMatches(ps []Pattern, pkg string) bool {
	return slices.ContainsFunc(ps, func(p Pattern) bool { return p.matches(pkg) })
}

// Rule forbids the packages From (less Except) to import any package Deny matches and Allow
// does not: directly, or through any chain of imports when Transitive.
type Rule struct {
	From, Except, Deny, Allow []Pattern
	Transitive                bool
	Why                       string
}

// Foundation is what every layer may import: OLM's typed views and facts, olmguard's names, the
// admission body decoder and the metric names.
var Foundation = []Pattern{"pkg/olm/...", "pkg/olmguard", "pkg/review", "pkg/metrics"}

// Knowledge are the packages that hold one failure class each, as pure functions and types.
var Knowledge = []Pattern{"pkg/owners", "pkg/drift", "pkg/cleanup", "pkg/unpack", "pkg/catalog", "pkg/operatorgroups"}

// Writes is the one write path: the guarded patches, the exact deletes and the nudge with which the
// consumers apply what the knowledge packages decide (the knowledge packages never write).
var Writes = []Pattern{"pkg/write"}

var everything = []Pattern{"pkg/...", "internal/...", "certs/...", "cmd/...", "test/...", "hack/...", "manifests/...", "charts/..."}

// Rules are olmguard's import rules.
var Rules = []Rule{
	{From: Foundation, Deny: everything, Allow: Foundation,
		Why: "the foundation stands on nothing of olmguard's but itself"},
	{From: Knowledge, Deny: everything, Allow: Foundation,
		Why: "a failure class's knowledge imports only the foundation, never a consumer of it"},
	{From: Writes, Deny: everything, Allow: slices.Concat(Foundation, Knowledge),
		Why: "the write path applies the knowledge packages' decisions for the consumers and imports none of them"},
	{From: []Pattern{"pkg/controller/*"}, Deny: []Pattern{"pkg/controller/..."},
		Why: "a reconciler shares knowledge through the knowledge packages, not through the manager or another reconciler"},
	{From: []Pattern{"pkg/...", "cmd/...", "internal/...", "certs/..."}, Except: []Pattern{"pkg/setup"}, Deny: []Pattern{"pkg/controller/*"},
		Why: "only the controller's setup assembles the reconcilers"},
	{From: []Pattern{"cmd/kubectl-olmguard", "pkg/doctor", "pkg/uninstall"}, Transitive: true,
		Deny: []Pattern{"pkg/controller/...", "pkg/webhook/...", "pkg/setup", "pkg/admit/...", "pkg/mutate", "pkg/validate"},
		Why:  "the kubectl plugin links neither the controller nor the webhook"},
	{From: []Pattern{"pkg/admit/registration"}, Deny: everything, Allow: Foundation,
		Why: "the webhook configurations are built from olmguard's and OLM's names alone, below the handlers that share their table"},
	{From: []Pattern{"pkg/admit/...", "pkg/mutate", "pkg/validate"},
		Deny: []Pattern{"pkg/controller/...", "pkg/doctor", "pkg/uninstall", "pkg/setup", "pkg/webhook"},
		Why:  "admission handlers stand apart from the controller, the tools and the server"},
	{From: []Pattern{"pkg/...", "internal/...", "certs/...", "cmd/..."}, Deny: []Pattern{"test/..."},
		Why: "product code never links the test harness"},
	{From: []Pattern{"cmd/...", "pkg/...", "certs/...", "manifests/..."}, Transitive: true, Deny: []Pattern{"charts/..."},
		Why: "the binaries do not link the Helm SDK: only make manifests, make dist and the tests render the chart"},
}

// Violation is one forbidden import.
type Violation struct {
	From, Imports string
	// Via is the chain of imports from From to Imports, for transitive rules.
	Via []string
	Why string
}

func (v Violation) String() string {
	if len(v.Via) > 0 {
		return fmt.Sprintf("%s imports %s (via %s): %s", v.From, v.Imports, strings.Join(v.Via, " -> "), v.Why)
	}
	return fmt.Sprintf("%s imports %s: %s", v.From, v.Imports, v.Why)
}

// Check returns every import of graph (package -> its direct imports, olmguard's packages only,
// relative to Module) that rules forbid, sorted.
func Check(graph map[string][]string, rules []Rule) []Violation {
	var out []Violation
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, r := range rules {
		for _, from := range pkgs {
			if !anyMatches(r.From, from) || anyMatches(r.Except, from) {
				continue
			}
			for _, imp := range reachable(graph, from, r.Transitive) {
				if anyMatches(r.Deny, imp.pkg) && !anyMatches(r.Allow, imp.pkg) {
					out = append(out, Violation{From: from, Imports: imp.pkg, Via: imp.via, Why: r.Why})
				}
			}
		}
	}
	return out
}

type reached struct {
	pkg string
	via []string
}

// reachable lists from's imports, or every package reachable from it (breadth first, each with
// the chain that first reached it).
func reachable(graph map[string][]string, from string, transitive bool) []reached {
	var out []reached
	seen := map[string]bool{from: true}
	queue := []reached{{pkg: from}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range graph[cur.pkg] {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			r := reached{pkg: imp}
			if cur.pkg != from {
				r.via = append(slices.Clone(cur.via), cur.pkg)
			}
			out = append(out, r)
			if transitive {
				queue = append(queue, r)
			}
		}
	}
	return out
}
