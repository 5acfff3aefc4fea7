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
// does not: directly, or through any chain of imports when Transitive. A rule with Tests is about
// From's tests instead: their first imports are those of the package with its _test.go files
// (CheckTests); Check skips it, and CheckTests checks only such rules.
type Rule struct {
	From, Except, Deny, Allow []Pattern
	Transitive                bool
	Tests                     bool
	Why                       string
}

// Foundation is what every layer may import: OLM's typed views and facts, olmguard's names, the
// admission body decoder and the metric names.
var Foundation = []Pattern{"pkg/olm/...", "pkg/olmguard", "pkg/review", "pkg/metrics"}

// Knowledge are the packages that hold one failure class each, as pure functions and types.
var Knowledge = []Pattern{"pkg/owners", "pkg/drift", "pkg/cleanup", "pkg/unpack", "pkg/catalog", "pkg/operatorgroups", "pkg/serviceaccounts", "pkg/replaces", "pkg/webhookprobe"}

// Writes is the one write path: the guarded patches, the exact deletes and the nudge with which the
// consumers apply what the knowledge packages decide (the knowledge packages never write).
var Writes = []Pattern{"pkg/write"}

var everything = []Pattern{"pkg/...", "internal/...", "certs/...", "cmd/...", "test/...", "hack/...", "manifests/...", "charts/..."}

// Harness are the test packages that start a cluster, a node, OLM or olmguard's installed
// binaries, and the tiers built on them ("test/realolm/...": the scenarios on OLM's own operators,
// which make demo and the hostile-tenant and real-node tiers replay too, and the real-OLM tier,
// test/realolm/tier). envtest (test/testenv, with the binary cache and process runner it starts
// its apiserver with), the OLM simulator and the scenarios it replays, the object builders and
// the small checkers (test/clitest, test/patchtest) are not: unit tests may use them. A package
// that imports the harness, in its code or its tests, is harness itself (TestHarnessIsClosed).
var Harness = []Pattern{"test/cluster/...", "test/node/...", "test/certmanager/...", "test/install",
	"test/e2e", "test/realolm/...", "test/realnode", "test/ha", "test/hostile", "test/demo", "test/load/..."}

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
	{From: []Pattern{"test/builders"}, Deny: everything, Allow: slices.Concat(Foundation, Knowledge),
		Why: "the object builders link no harness, so a unit test that builds objects links nothing more"},
	{From: []Pattern{"pkg/...", "internal/...", "certs/...", "cmd/..."}, Tests: true, Transitive: true, Deny: Harness,
		Why: "unit tests run in-process or on envtest: they link no kwok cluster, node, OLM or installed olmguard, whose tiers start those (make test-e2e, test-realolm, ...)"},
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
// relative to Module) that rules without Tests forbid, sorted.
func Check(graph map[string][]string, rules []Rule) []Violation {
	return check(graph, nil, rules, false)
}

// CheckTests returns every import of the packages' tests that rules with Tests forbid: tests maps
// a package to the direct imports of its test binary (the package's imports with those of its
// _test.go files, in-package and external), and the imports reached from there are graph's.
func CheckTests(graph, tests map[string][]string, rules []Rule) []Violation {
	return check(graph, tests, rules, true)
}

func check(graph, tests map[string][]string, rules []Rule, ofTests bool) []Violation {
	var out []Violation
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, r := range rules {
		if r.Tests != ofTests {
			continue
		}
		for _, from := range pkgs {
			if !anyMatches(r.From, from) || anyMatches(r.Except, from) {
				continue
			}
			first := graph[from]
			if ofTests {
				first = tests[from]
			}
			for _, imp := range reachable(graph, from, first, r.Transitive) {
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

// reachable lists from's imports (first), or every package reachable from it (breadth first,
// each with the chain that first reached it).
func reachable(graph map[string][]string, from string, first []string, transitive bool) []reached {
	var out []reached
	seen := map[string]bool{from: true}
	queue := []reached{{pkg: from}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		imports := graph[cur.pkg]
		if cur.pkg == from {
			imports = first
		}
		for _, imp := range imports {
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
