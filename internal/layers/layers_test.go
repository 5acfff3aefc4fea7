package layers

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func TestPattern(t *testing.T) {
	for _, tc := range []struct {
		pattern Pattern
		pkg     string
		want    bool
	}{
		{"pkg/x", "pkg/x", true},
		{"pkg/x", "pkg/x/y", false},
		{"pkg/x/...", "pkg/x", true},
		{"pkg/x/...", "pkg/x/y/z", true},
		{"pkg/x/...", "pkg/xy", false},
		{"pkg/x/*", "pkg/x", false},
		{"pkg/x/*", "pkg/x/y", true},
	} {
		if got := tc.pattern.matches(tc.pkg); got != tc.want {
			t.Errorf("%q matches %q = %v, want %v", tc.pattern, tc.pkg, got, tc.want)
		}
	}
}

// Each rule catches a deliberate violation, and a graph that keeps the layers passes.
func TestCheckCatchesViolations(t *testing.T) {
	good := map[string][]string{
		"pkg/olm/v1alpha1":     {"pkg/olm"},
		"pkg/owners":           {"pkg/olm", "pkg/olm/v1alpha1"},
		"pkg/mutate":           {"pkg/owners", "pkg/admit", "pkg/metrics"},
		"pkg/write":            {"pkg/owners", "pkg/drift", "pkg/metrics", "pkg/olm/v1alpha1"},
		"pkg/controller/a":     {"pkg/owners", "pkg/metrics", "pkg/write"},
		"pkg/uninstall":        {"pkg/cleanup", "pkg/write"},
		"pkg/controller":       {"pkg/metrics"},
		"pkg/doctor":           {"pkg/owners"},
		"pkg/setup":            {"pkg/controller", "pkg/controller/a", "pkg/mutate"},
		"cmd/kubectl-olmguard": {"pkg/doctor"},
		"cmd/controller":       {"pkg/setup", "pkg/controller"},
		"internal/cli":         nil,
		"test/testenv":         {"pkg/controller"},
		"test/builders":        {"pkg/olm", "pkg/olm/v1alpha1", "pkg/unpack"},
	}
	if v := Check(good, Rules); len(v) > 0 {
		t.Fatalf("a layered graph has violations: %v", v)
	}
	for _, tc := range []struct {
		name, from, imports string
		want                string // a substring of the violation
	}{
		{"foundation imports a consumer", "pkg/olm", "pkg/mutate", "pkg/olm imports pkg/mutate"},
		{"knowledge imports a handler", "pkg/owners", "pkg/mutate", "pkg/owners imports pkg/mutate"},
		{"knowledge imports the write path", "pkg/owners", "pkg/write", "pkg/owners imports pkg/write"},
		{"the write path imports a reconciler", "pkg/write", "pkg/controller/a", "pkg/write imports pkg/controller/a"},
		// Fails without the write path's own rule: nothing else forbids it pkg/admit directly.
		{"the write path imports a handler", "pkg/write", "pkg/admit", "pkg/write imports pkg/admit"},
		{"metric names import the access gate", "pkg/metrics", "pkg/metricsauth", "pkg/metrics imports pkg/metricsauth"},
		{"reconciler imports a reconciler", "pkg/controller/a", "pkg/controller/b", "pkg/controller/a imports pkg/controller/b"},
		{"reconciler imports the manager", "pkg/controller/a", "pkg/controller", "pkg/controller/a imports pkg/controller:"},
		{"doctor imports a reconciler", "pkg/doctor", "pkg/controller/a", "pkg/doctor imports pkg/controller/a"},
		{"plugin links the controller", "pkg/owners", "pkg/controller", "cmd/kubectl-olmguard imports pkg/controller (via pkg/doctor -> pkg/owners)"},
		{"handler imports the server", "pkg/mutate", "pkg/webhook", "pkg/mutate imports pkg/webhook"},
		{"configuration builder imports the table's types", "pkg/admit/registration", "pkg/admit", "pkg/admit/registration imports pkg/admit"},
		{"shared admission code imports the server", "pkg/admit", "pkg/webhook", "pkg/admit imports pkg/webhook"},
		// Fails before the fix: the plugin's rule named pkg/admit alone, and registration
		// was kept out only by living under pkg/webhook.
		{"plugin links the webhook configurations", "pkg/doctor", "pkg/admit/registration", "cmd/kubectl-olmguard imports pkg/admit/registration (via pkg/doctor)"},
		{"product code imports the harness", "pkg/setup", "test/testenv", "pkg/setup imports test/testenv"},
		{"a binary links the Helm SDK", "pkg/setup", "charts", "cmd/controller imports charts (via pkg/setup)"},
		{"the builders import a harness", "test/builders", "test/testenv", "test/builders imports test/testenv"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := map[string][]string{}
			for k, v := range good {
				bad[k] = slices.Clone(v)
			}
			bad[tc.from] = append(bad[tc.from], tc.imports)
			if _, ok := bad[tc.imports]; !ok {
				bad[tc.imports] = nil
			}
			vs := Check(bad, Rules)
			found := false
			for _, v := range vs {
				found = found || strings.Contains(v.String(), tc.want)
			}
			if !found {
				t.Errorf("no violation containing %q in %v", tc.want, vs)
			}
		})
	}
}

// The rule on tests catches a unit test that links a harness, directly or through a test helper,
// and lets the packages' own imports and envtest pass.
func TestCheckTestsCatchesHarness(t *testing.T) {
	graph := map[string][]string{
		"pkg/catalog":      {"pkg/olm"},
		"pkg/olm":          nil,
		"pkg/setup":        {"pkg/catalog"},
		"test/builders":    {"pkg/olm"},
		"test/testenv":     {"test/procs", "test/testbin"},
		"test/procs":       {"test/testbin"},
		"test/testbin":     nil,
		"test/olmsim":      {"test/testenv"},
		"test/scenario":    {"test/olmsim", "test/testenv"},
		"test/cluster":     {"test/procs", "test/testenv"},
		"test/e2e":         {"test/cluster"},
		"test/bad":         {"test/cluster"},
		"internal/layers":  nil,
		"test/certmanager": {"test/procs"},
	}
	good := map[string][]string{
		"pkg/catalog": {"pkg/olm", "test/builders"},
		"pkg/setup":   {"pkg/catalog", "test/testenv", "test/scenario", "test/builders"},
		// A tier's own tests start what they need.
		"test/e2e": {"test/cluster"},
	}
	if v := CheckTests(graph, good, Rules); len(v) > 0 {
		t.Fatalf("unit tests on envtest have violations: %v", v)
	}
	for _, tc := range []struct {
		name, from, imports string
		want                string
	}{
		// Fails before the rule on tests: Check looks at the packages' own imports only.
		{"a unit test imports the kwok cluster", "pkg/catalog", "test/cluster", "pkg/catalog imports test/cluster:"},
		{"a unit test links a cluster through a helper", "pkg/setup", "test/bad", "pkg/setup imports test/cluster (via test/bad)"},
		{"an internal test imports cert-manager's processes", "internal/layers", "test/certmanager", "internal/layers imports test/certmanager"},
		{"a unit test imports a tier", "pkg/catalog", "test/e2e", "pkg/catalog imports test/e2e"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tests := map[string][]string{}
			for k, v := range good {
				tests[k] = slices.Clone(v)
			}
			tests[tc.from] = append(tests[tc.from], tc.imports)
			vs := CheckTests(graph, tests, Rules)
			found := false
			for _, v := range vs {
				found = found || strings.Contains(v.String(), tc.want)
			}
			if !found {
				t.Errorf("no violation containing %q in %v", tc.want, vs)
			}
			// The packages themselves import no harness: only the tests' check sees it.
			if vs := Check(graph, Rules); len(vs) > 0 {
				t.Errorf("Check on the packages' own imports: %v", vs)
			}
		})
	}
}

// olmguard's own packages, and their tests, keep the layers.
func TestTreeKeepsTheLayers(t *testing.T) {
	graph, tests := tree(t)
	if len(tests["pkg/catalog"]) <= len(graph["pkg/catalog"]) {
		t.Fatalf("go list found no test imports of pkg/catalog: %v", tests["pkg/catalog"])
	}
	for _, v := range Check(graph, Rules) {
		t.Error(v)
	}
	for _, v := range CheckTests(graph, tests, Rules) {
		t.Error(v)
	}
}

// TestHarnessIsClosed: every test package of the tree whose code or tests import a Harness
// package is in Harness too, so a new tier (test/realolm/tier, split from its scenarios) is
// covered by the rule that keeps unit tests off the harness. (Product code and its tests have
// rules of their own.)
func TestHarnessIsClosed(t *testing.T) {
	_, tests := tree(t)
	if !anyMatches(Harness, "test/realolm/tier") {
		t.Errorf("Harness does not cover the real-OLM tier, test/realolm/tier")
	}
	for pkg, imports := range tests {
		if !strings.HasPrefix(pkg, "test/") || anyMatches(Harness, pkg) {
			continue
		}
		for _, imp := range imports {
			if anyMatches(Harness, imp) {
				t.Errorf("%s imports %s, in Harness, but is not in Harness", pkg, imp)
			}
		}
	}
}

// tree is the import graph of olmguard's packages (relative to Module) and their test binaries'
// direct imports, from go list.
func tree(t *testing.T) (graph, tests map[string][]string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f",
		"{{.ImportPath}}{{range .Imports}} {{.}}{{end}} |{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}",
		Module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	graph, tests = map[string][]string{}, map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		own, withTests, _ := strings.Cut(line, " |")
		fields := strings.Fields(own)
		pkg, ok := relative(fields[0])
		if !ok {
			continue
		}
		graph[pkg], tests[pkg] = relatives(fields[1:]), relatives(strings.Fields(withTests))
	}
	if len(graph) < 20 {
		t.Fatalf("go list found %d packages, want olmguard's", len(graph))
	}
	return graph, tests
}

// relatives are the olmguard packages of pkgs, relative to Module.
func relatives(pkgs []string) []string {
	var out []string
	for _, p := range pkgs {
		if rel, ok := relative(p); ok {
			out = append(out, rel)
		}
	}
	return out
}

func relative(pkg string) (string, bool) {
	rel, ok := strings.CutPrefix(pkg, Module+"/")
	return rel, ok
}
