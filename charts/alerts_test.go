package charts_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/testbin"
)

// The alerts' unit tests (promtool's format) and the name of the rules file they load, which
// TestAlertRulesPromtool writes from the PrometheusRule the chart renders.
const (
	alertTestsDir = "testdata/alerts"
	rulesFileName = "olmguard-rules.yaml"
	runbookBase   = "https://github.com/olmguard/olmguard/blob/main/docs/alerts.md"
)

type alertRule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroup struct {
	Name  string      `json:"name"`
	Rules []alertRule `json:"rules"`
}

// rulesFile is the chart's plain Prometheus rules file, which its PrometheusRule wraps.
const rulesFile = "olmguard/rules/olmguard.rules.yaml"

// TestRulesFileIsThePrometheusRule: the rules file a Prometheus without the Operator loads holds
// exactly the PrometheusRule's spec, and alertLabels add labels to every alert without changing
// its severity.
func TestRulesFileIsThePrometheusRule(t *testing.T) {
	spec, _ := ruleSpec(t)
	var fromChart, fromFile any
	if err := json.Unmarshal(spec, &fromChart); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(readFile(t, rulesFile), &fromFile); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fromFile, fromChart); diff != "" {
		t.Errorf("the PrometheusRule's spec differs from %s (-file +PrometheusRule):\n%s", rulesFile, diff)
	}

	objs, err := charts.Objects(load(t), charts.Options{Values: map[string]any{"prometheusRule": map[string]any{
		"enabled": true, "alertLabels": map[string]any{"team": "platform", "severity": "none"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	pr := find(objs, "PrometheusRule", "olmguard")
	if pr == nil {
		t.Fatal("no PrometheusRule")
	}
	b, err := json.Marshal(pr.Object["spec"])
	if err != nil {
		t.Fatal(err)
	}
	var labelled struct{ Groups []ruleGroup }
	if err := json.Unmarshal(b, &labelled); err != nil {
		t.Fatal(err)
	}
	_, groups := ruleSpec(t)
	for i, g := range labelled.Groups {
		for j, r := range g.Rules {
			want := map[string]string{"team": "platform", "severity": groups[i].Rules[j].Labels["severity"]}
			if !maps.Equal(r.Labels, want) {
				t.Errorf("%s: labels %v, want %v", r.Alert, r.Labels, want)
			}
		}
	}
}

// monitoringObjects renders the chart with its ServiceMonitor and PrometheusRule.
func monitoringObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	objs, err := charts.Objects(load(t), charts.Options{Values: map[string]any{
		"serviceMonitor": map[string]any{"enabled": true},
		"prometheusRule": map[string]any{"enabled": true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// ruleSpec returns the spec of the PrometheusRule the chart renders with prometheusRule.enabled
// (which manifests/components/prometheusrule is), as JSON, and its groups.
func ruleSpec(t *testing.T) ([]byte, []ruleGroup) {
	t.Helper()
	objs := monitoringObjects(t)
	var spec []byte
	for _, o := range objs {
		if o.GetKind() != "PrometheusRule" {
			continue
		}
		if spec != nil {
			t.Fatal("more than one PrometheusRule")
		}
		var err error
		if spec, err = json.Marshal(o.Object["spec"]); err != nil {
			t.Fatal(err)
		}
		if o.GetNamespace() != "olmguard-system" {
			t.Errorf("PrometheusRule in namespace %q, want olmguard-system", o.GetNamespace())
		}
	}
	if spec == nil {
		t.Fatal("no PrometheusRule in the overlay with the prometheusrule component")
	}
	var s struct {
		Groups []ruleGroup `json:"groups"`
	}
	if err := json.Unmarshal(spec, &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Groups) == 0 {
		t.Fatal("the PrometheusRule has no groups")
	}
	return spec, s.Groups
}

// TestAlertRules checks every alert without promtool: its name, severity and annotations, the
// runbook section and README row it points at, that each metric it reads is one olmguard (or
// the library serving olmguard's /metrics) exports with the labels it matches on, that the jobs
// it names are the Services the ServiceMonitor scrapes, and that the promtool tests make it fire
// and keep it silent at least once each.
func TestAlertRules(t *testing.T) {
	_, groups := ruleSpec(t)
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../docs/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	exported := olmguardMetrics(t)
	jobs := scrapedJobs(t)
	coverage := testedAlerts(t)

	name := regexp.MustCompile(`^Olmguard[A-Z][A-Za-z0-9]+$`)
	seen := map[string]bool{}
	for _, g := range groups {
		if !strings.HasPrefix(g.Name, "olmguard.") {
			t.Errorf("group %q: want a name starting with olmguard.", g.Name)
		}
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a rule that is no alert (record %q): this component holds alerts only", g.Name, r.Record)
				continue
			}
			t.Run(r.Alert, func(t *testing.T) {
				if !name.MatchString(r.Alert) {
					t.Errorf("name %q: want Olmguard<What> in CamelCase", r.Alert)
				}
				if seen[r.Alert] {
					t.Errorf("%s defined twice", r.Alert)
				}
				seen[r.Alert] = true
				if s := r.Labels["severity"]; !slices.Contains([]string{"critical", "warning", "info"}, s) {
					t.Errorf("severity %q: want critical, warning or info", s)
				}
				for _, a := range []string{"summary", "description"} {
					if strings.TrimSpace(r.Annotations[a]) == "" {
						t.Errorf("no %s annotation", a)
					}
				}
				anchor := strings.ToLower(r.Alert)
				if got, want := r.Annotations["runbook_url"], runbookBase+"#"+anchor; got != want {
					t.Errorf("runbook_url %q, want %q", got, want)
				}
				if !regexp.MustCompile(`(?m)^#{2,3} ` + r.Alert + `$`).Match(runbook) {
					t.Errorf("docs/alerts.md has no section %q (the runbook_url's anchor)", "### "+r.Alert)
				}
				if !regexp.MustCompile("(?m)^\\| `" + r.Alert + "` \\|").Match(readme) {
					t.Errorf("README.md's alert table has no row for `%s`", r.Alert)
				}
				if r.For != "" {
					if _, err := time.ParseDuration(r.For); err != nil {
						t.Errorf("for %q: %v", r.For, err)
					}
				}
				sels, err := promqlSelectors(r.Expr)
				if err != nil {
					t.Fatalf("expr %q: %v", r.Expr, err)
				}
				if len(sels) == 0 {
					t.Fatalf("expr %q reads no metric", r.Expr)
				}
				for _, s := range sels {
					for _, p := range selectorProblems(s, exported, jobs) {
						t.Error(p)
					}
				}
				if c := coverage[r.Alert]; !c.fires || !c.silent {
					t.Errorf("%s/*.yaml: want a case where %s fires (%v) and one where it must not (%v)", alertTestsDir, r.Alert, c.fires, c.silent)
				}
			})
		}
	}
	for a := range coverage {
		if !seen[a] {
			t.Errorf("%s/*.yaml tests %s, which no rule defines", alertTestsDir, a)
		}
	}
}

// TestPodAlertsSelectOlmguardsContainers: the alerts reading kube-state-metrics' pod series select
// olmguard's pods by pod and container name, so the names must be those of the Deployments the
// chart renders (the kustomize base is generated from it, TestSync): a renamed Deployment or
// container would leave the alerts silent. They must not select what merely resembles olmguard,
// and they must read olmguard's own up series, which keep them to olmguard's namespace.
// Fails before the fix (issue 32, item 4): no alert read kube-state-metrics' pod series, so an
// OOM-killed or crash-looping olmguard container was not alerted on.
func TestPodAlertsSelectOlmguardsContainers(t *testing.T) {
	_, groups := ruleSpec(t)
	var pods, containers []string
	for _, o := range monitoringObjects(t) {
		if o.GetKind() != "Deployment" {
			continue
		}
		// a ReplicaSet's pod: <Deployment>-<pod-template-hash>-<suffix>
		pods = append(pods, o.GetName()+"-7d4b9c8f6d-x2x7q")
		cs, _, err := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		if err != nil || len(cs) == 0 {
			t.Fatalf("Deployment %s: no containers (%v)", o.GetName(), err)
		}
		for _, c := range cs {
			name, _ := c.(map[string]any)["name"].(string)
			containers = append(containers, name)
		}
	}
	if len(pods) != 2 {
		t.Fatalf("the chart renders Deployments for pods %v, want the webhook's and the controller's", pods)
	}
	notOlmguard := map[string][]string{
		"pod":       {"x-olmguard-controller-7d4b9c8f6d-x2x7q", "olmguard-catalog-7d4b9c8f6d-x2x7q", "olmguard-controller"},
		"container": {"manager", "controller-sidecar", "kube-rbac-proxy"},
	}
	want := map[string][]string{"pod": pods, "container": containers}
	read := 0
	for _, g := range groups {
		for _, r := range g.Rules {
			sels, err := promqlSelectors(r.Expr)
			if err != nil {
				t.Fatalf("%s: %v", r.Alert, err)
			}
			ksm, up := false, false
			for _, s := range sels {
				up = up || s.Name == "up"
				if _, ok := kubeStateMetrics[s.Name]; !ok {
					continue
				}
				ksm = true
				for _, label := range []string{"pod", "container"} {
					i := slices.IndexFunc(s.Matchers, func(m matcher) bool { return m.Label == label })
					if i < 0 {
						t.Errorf("%s: %s does not select by %s", r.Alert, s.Name, label)
						continue
					}
					// PromQL anchors a regular expression at both ends
					re, err := regexp.Compile("^(?:" + s.Matchers[i].Value + ")$")
					if err != nil {
						t.Errorf("%s: %s{%s}: %v", r.Alert, s.Name, label, err)
						continue
					}
					for _, v := range want[label] {
						if !re.MatchString(v) {
							t.Errorf("%s: %s{%s=~%q} misses olmguard's %s %q", r.Alert, s.Name, label, s.Matchers[i].Value, label, v)
						}
					}
					for _, v := range notOlmguard[label] {
						if re.MatchString(v) {
							t.Errorf("%s: %s{%s=~%q} selects %s %q, which is not olmguard's", r.Alert, s.Name, label, s.Matchers[i].Value, label, v)
						}
					}
				}
			}
			if ksm {
				read++
				if !up || !strings.Contains(r.Expr, "on (namespace)") {
					t.Errorf("%s reads kube-state-metrics without joining on (namespace) with olmguard's up series:\n%s", r.Alert, r.Expr)
				}
			}
		}
	}
	if read < 2 {
		t.Errorf("%d alerts read kube-state-metrics' pod series, want the OOM kill and the restart alerts", read)
	}
}

// targetLabels are the labels Prometheus (and the Prometheus Operator) attach to every series of
// a scraped target; an alert may match on them whatever the metric.
var targetLabels = []string{"job", "namespace", "pod", "instance", "service", "container", "endpoint"}

// foreignMetrics are the metrics alerts read that olmguard does not define: up, which Prometheus
// writes for each target, and controller-runtime's leader election gauge, which the controller's
// /metrics serves (set to 1 on the leader only).
var foreignMetrics = map[string][]string{
	"up":                            nil,
	"leader_election_master_status": {"name"},
}

// kubeStateMetrics are the kube-state-metrics series the alerts on olmguard's own pods read (OOM
// kills, restarts), with their labels. kube-state-metrics serves them, not olmguard: their labels
// namespace, pod and container are the pod's, which kube-state-metrics' usual scrape keeps
// (honor_labels).
var kubeStateMetrics = map[string][]string{
	"kube_pod_container_status_restarts_total":         {"namespace", "pod", "uid", "container"},
	"kube_pod_container_status_last_terminated_reason": {"namespace", "pod", "uid", "container", "reason"},
}

// selectorProblems says what is wrong with a selector an alert reads, if anything.
func selectorProblems(s selector, exported map[string][]string, jobs []string) []string {
	var out []string
	labels, ok := exported[s.Name]
	if !ok {
		if labels, ok = kubeStateMetrics[s.Name]; ok {
			// served by kube-state-metrics: its job is not olmguard's, its labels are the pod's
			for _, m := range s.Matchers {
				if !slices.Contains(labels, m.Label) {
					out = append(out, fmt.Sprintf("%s{%s}: kube-state-metrics gives it no label %s (it has %v)", s.Name, m.Label, m.Label, labels))
				}
			}
			return out
		}
		if labels, ok = foreignMetrics[s.Name]; !ok {
			return []string{s.Name + ": not a metric olmguard exports (pkg/metrics)"}
		}
		if s.Name != "up" && !registered(s.Name) {
			out = append(out, s.Name+": not registered in controller-runtime's registry, which olmguard serves")
		}
	}
	for _, m := range s.Matchers {
		if !slices.Contains(labels, m.Label) && !slices.Contains(targetLabels, m.Label) {
			out = append(out, fmt.Sprintf("%s{%s}: the metric has no label %s (it has %v)", s.Name, m.Label, m.Label, labels))
		}
		switch {
		case m.Label == "job" && !slices.Contains(jobs, m.Value):
			out = append(out, fmt.Sprintf("%s{job=%q}: not a job the ServiceMonitor scrapes (%v)", s.Name, m.Value, jobs))
		case s.Name == "leader_election_master_status" && m.Label == "name" && m.Value != olmguard.ControllerLeaderElectionID:
			out = append(out, fmt.Sprintf("%s{name=%q}: the controller's Lease is %q", s.Name, m.Value, olmguard.ControllerLeaderElectionID))
		}
	}
	return out
}

// olmguardMetrics returns every metric pkg/metrics registers, with its label names, from the
// collectors' descriptions.
func olmguardMetrics(t *testing.T) map[string][]string {
	t.Helper()
	re := regexp.MustCompile(`^Desc\{fqName: "([^"]+)", .*variableLabels: \{([^}]*)\}\}$`)
	out := map[string][]string{}
	for _, c := range metrics.Collectors() {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := re.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name and labels of %s", d)
			}
			var labels []string
			if m[2] != "" {
				labels = strings.Split(m[2], ",")
			}
			out[m[1]] = labels
		}
	}
	if len(out) < 10 {
		t.Fatalf("read %d metrics from pkg/metrics, want all of them: %v", len(out), out)
	}
	return out
}

// registered reports whether controller-runtime's registry, which both binaries serve, holds a
// metric of that name: registering another collector of the name with a different help is then
// refused.
func registered(name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe of alerts_test.go"})
	if err := ctrlmetrics.Registry.Register(probe); err != nil {
		return true
	}
	ctrlmetrics.Registry.Unregister(probe)
	return false
}

// scrapedJobs returns the jobs the ServiceMonitor makes: the Prometheus Operator names a job
// after the Service it scrapes, and the ServiceMonitor selects the metrics Services.
func scrapedJobs(t *testing.T) []string {
	t.Helper()
	objs := monitoringObjects(t)
	var selector map[string]string
	for _, o := range objs {
		if o.GetKind() != "ServiceMonitor" {
			continue
		}
		spec, _ := o.Object["spec"].(map[string]any)
		if _, ok := spec["jobLabel"]; ok {
			t.Fatal("the ServiceMonitor sets jobLabel: the alerts' job names assume the Service names")
		}
		sel, _ := spec["selector"].(map[string]any)
		ml, _ := sel["matchLabels"].(map[string]any)
		selector = map[string]string{}
		for k, v := range ml {
			selector[k], _ = v.(string)
		}
	}
	if len(selector) == 0 {
		t.Fatal("no ServiceMonitor with matchLabels")
	}
	var jobs []string
	for _, o := range objs {
		if o.GetKind() != "Service" {
			continue
		}
		matches := true
		for k, v := range selector {
			matches = matches && o.GetLabels()[k] == v
		}
		if matches {
			jobs = append(jobs, o.GetName())
		}
	}
	if len(jobs) != 2 {
		t.Fatalf("the ServiceMonitor selects Services %v, want the webhook's and the controller's metrics Services", jobs)
	}
	return jobs
}

type alertCoverage struct{ fires, silent bool }

// testedAlerts reads the promtool tests: for each alert, whether one evaluation expects it firing
// and one expects it silent.
func testedAlerts(t *testing.T) map[string]alertCoverage {
	t.Helper()
	files, err := filepath.Glob(alertTestsDir + "/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool tests in %s: %v", alertTestsDir, err)
	}
	out := map[string]alertCoverage{}
	for _, f := range files {
		var doc struct {
			RuleFiles []string `json:"rule_files"`
			Tests     []struct {
				Name          string `json:"name"`
				AlertRuleTest []struct {
					Alertname string `json:"alertname"`
					ExpAlerts []any  `json:"exp_alerts"`
				} `json:"alert_rule_test"`
			} `json:"tests"`
		}
		if err := yaml.Unmarshal(readFile(t, f), &doc); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !slices.Equal(doc.RuleFiles, []string{rulesFileName}) {
			t.Errorf("%s: rule_files %v, want [%s]", f, doc.RuleFiles, rulesFileName)
		}
		for _, tc := range doc.Tests {
			for _, a := range tc.AlertRuleTest {
				c := out[a.Alertname]
				if len(a.ExpAlerts) > 0 {
					c.fires = true
				} else {
					c.silent = true
				}
				out[a.Alertname] = c
			}
		}
	}
	return out
}

func readFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAlertRulesPromtool runs promtool (hack/test-binaries.sh builds it at the version pinned in
// hack/versions.env) on the rendered PrometheusRule: `check rules`, then `test rules` with the
// component's tests. It then shows the tests would catch a rule that fires at once instead of
// waiting its `for`.
func TestAlertRulesPromtool(t *testing.T) {
	dir := testbin.Require(t, "promtool")
	promtool := filepath.Join(dir, "promtool")
	spec, groups := ruleSpec(t)
	work := t.TempDir()
	tests := writeRuleTests(t, work, spec)

	run := func(args ...string) (string, error) {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = work
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := run("check", "rules", rulesFileName)
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	n := 0
	for _, g := range groups {
		n += len(g.Rules)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", n); !strings.Contains(out, want) {
		t.Errorf("promtool check rules: want %q in\n%s", want, out)
	}
	// The chart's rules file, as a Prometheus without the Operator loads it.
	raw, err := filepath.Abs(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := run("check", "rules", raw); err != nil {
		t.Errorf("promtool check rules %s: %v\n%s", rulesFile, err, out)
	}
	out, err = run(append([]string{"test", "rules"}, tests...)...)
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if got := strings.Count(out, "SUCCESS"); got != len(tests) {
		t.Errorf("promtool test rules: %d of %d files succeeded\n%s", got, len(tests), out)
	}
	t.Logf("promtool test rules %s:\n%s", strings.Join(tests, " "), out)

	// The same tests against rules that fire at once must fail: they check the waiting.
	var mutated struct {
		Groups []map[string]any `json:"groups"`
	}
	if err := json.Unmarshal(spec, &mutated); err != nil {
		t.Fatal(err)
	}
	for _, g := range mutated.Groups {
		rules, _ := g["rules"].([]any)
		for _, r := range rules {
			delete(r.(map[string]any), "for")
		}
	}
	b, err := json.Marshal(mutated)
	if err != nil {
		t.Fatal(err)
	}
	writeRuleTests(t, work, b)
	out, err = run(append([]string{"test", "rules"}, tests...)...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Errorf("promtool test rules with every `for` removed: %v, want failed tests\n%s", err, out)
	}
}

// writeRuleTests writes the rules file (spec as YAML) and the component's tests into dir and
// returns the tests' names.
func writeRuleTests(t *testing.T, dir string, spec []byte) []string {
	t.Helper()
	rules, err := yaml.JSONToYAML(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rulesFileName), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	names, err := filepath.Glob(alertTestsDir + "/*.yaml")
	if err != nil || len(names) == 0 {
		t.Fatalf("no promtool tests in %s: %v", alertTestsDir, err)
	}
	var out []string
	for _, n := range names {
		base := filepath.Base(n)
		if err := os.WriteFile(filepath.Join(dir, base), readFile(t, n), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, base)
	}
	return out
}

// selector is one metric an expression reads, with its label matchers.
type selector struct {
	Name     string
	Matchers []matcher
}

type matcher struct{ Label, Value string }

// promqlWords are PromQL's functions, aggregations and keywords used as bare words in olmguard's
// rules; any other bare word is read as a metric name (so a word missing here fails the test
// instead of being skipped).
var promqlWords = map[string]bool{
	"sum": true, "max": true, "min": true, "count": true, "avg": true, "group": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"and": true, "or": true, "unless": true, "offset": true, "bool": true,
}

// labelListWords are followed by a list of label names in parentheses.
var labelListWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// promqlSelectors returns the metric selectors of a PromQL expression: each bare name that is not
// a function, aggregation or keyword, with the matchers in braces after it. It knows the subset
// of PromQL the rules use, and refuses what it cannot read (a selector without a metric name).
func promqlSelectors(expr string) ([]selector, error) {
	var out []selector
	i := 0
	skipSpace := func() {
		for i < len(expr) && strings.ContainsRune(" \t\n\r", rune(expr[i])) {
			i++
		}
	}
	readString := func() (string, error) {
		q := expr[i]
		j := i + 1
		for j < len(expr) && expr[j] != q {
			if expr[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(expr) {
			return "", fmt.Errorf("unterminated string at %d", i)
		}
		s := expr[i+1 : j]
		i = j + 1
		return s, nil
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	for i < len(expr) {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			if _, err := readString(); err != nil {
				return nil, err
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++ // a number or a duration: 7, 0.0, 86400, 10m
			}
		case c == '{':
			return nil, fmt.Errorf("a selector without a metric name at %d", i)
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			skipSpace()
			switch {
			case labelListWords[word]:
				if i < len(expr) && expr[i] == '(' {
					end := strings.IndexByte(expr[i:], ')')
					if end < 0 {
						return nil, fmt.Errorf("unterminated label list after %s", word)
					}
					i += end + 1
				}
			case promqlWords[word]:
			case i < len(expr) && expr[i] == '(':
				// a function call: rate(, increase(, absent(, time(
			default:
				s := selector{Name: word}
				if i < len(expr) && expr[i] == '{' {
					i++
					for {
						skipSpace()
						if i >= len(expr) {
							return nil, fmt.Errorf("unterminated matchers of %s", word)
						}
						if expr[i] == '}' {
							i++
							break
						}
						if expr[i] == ',' {
							i++
							continue
						}
						ls := i
						for i < len(expr) && isIdent(expr[i]) {
							i++
						}
						label := expr[ls:i]
						skipSpace()
						for i < len(expr) && strings.ContainsRune("=!~", rune(expr[i])) {
							i++
						}
						skipSpace()
						if label == "" || i >= len(expr) || !strings.ContainsRune("\"'`", rune(expr[i])) {
							return nil, fmt.Errorf("cannot read the matchers of %s at %d", word, i)
						}
						value, err := readString()
						if err != nil {
							return nil, err
						}
						s.Matchers = append(s.Matchers, matcher{Label: label, Value: value})
					}
				}
				out = append(out, s)
			}
		default:
			i++
		}
	}
	return out, nil
}

func TestPromQLSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr    string
		want    []selector
		wantErr string
	}{
		{expr: `absent(up{job="a"} == 1)`, want: []selector{{"up", []matcher{{"job", "a"}}}}},
		{expr: `sum by (path, result) (increase(x_total{result="error", path=~"/m/.*"}[10m])) > 0`,
			want: []selector{{"x_total", []matcher{{"result", "error"}, {"path", "/m/.*"}}}}},
		{expr: `(g > 0) - time() < 7 * 86400`, want: []selector{{"g", nil}}},
		{expr: "count(a == 1)\n  unless on (namespace)\nmax(b{name='n'} == 1)",
			want: []selector{{"a", nil}, {"b", []matcher{{"name", "n"}}}}},
		{expr: `(increase(c[1h]) > 0) or (c unless c offset 1h)`, want: []selector{{"c", nil}, {"c", nil}, {"c", nil}}},
		{expr: `d{l="has } and \" inside"} > 0.5`, want: []selector{{"d", []matcher{{"l", `has } and \" inside`}}}}},
		{expr: `sum(nonsense_word) by (x) > 1e3`, want: []selector{{"nonsense_word", nil}}},
		{expr: "x and on (namespace)\n  group by (namespace) (up{job=\"a\"} or up{job=\"b\"})",
			want: []selector{{"x", nil}, {"up", []matcher{{"job", "a"}}}, {"up", []matcher{{"job", "b"}}}}},
		{expr: `{__name__="up"}`, wantErr: "without a metric name"},
		{expr: `up{job="a"`, wantErr: "unterminated"},
	} {
		got, err := promqlSelectors(tc.expr)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.expr, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.expr, err)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q:\n got %v\nwant %v", tc.expr, got, tc.want)
		}
	}
}

// The checks on a selector catch what they are for: a metric olmguard does not export, a label
// the metric lacks, a job nobody scrapes, another Lease, a foreign metric nothing registers.
func TestSelectorProblems(t *testing.T) {
	exported := map[string][]string{"olmguard_x_total": {"reason"}}
	jobs := []string{"olmguard-webhook-metrics"}
	for _, tc := range []struct {
		s    selector
		want string
	}{
		{selector{Name: "olmguard_y_total"}, "not a metric olmguard exports"},
		{selector{"olmguard_x_total", []matcher{{"result", "error"}}}, "has no label result"},
		{selector{"up", []matcher{{"job", "olmguard-nothing"}}}, "not a job the ServiceMonitor scrapes"},
		{selector{"leader_election_master_status", []matcher{{"name", "another-lease"}}}, "the controller's Lease is"},
		{selector{"olmguard_x_total", []matcher{{"reason", "r"}, {"pod", "p"}}}, ""},
		{selector{"leader_election_master_status", []matcher{{"name", olmguard.ControllerLeaderElectionID}}}, ""},
		{selector{"up", []matcher{{"job", "olmguard-webhook-metrics"}}}, ""},
		{selector{"kube_pod_container_status_restarts_total", []matcher{{"reason", "OOMKilled"}}}, "kube-state-metrics gives it no label reason"},
		{selector{"kube_pod_container_status_restarts_total", []matcher{{"job", "olmguard-webhook-metrics"}}}, "kube-state-metrics gives it no label job"},
		{selector{"kube_pod_container_status_last_terminated_reason", []matcher{{"reason", "OOMKilled"}, {"container", "webhook"}}}, ""},
	} {
		got := strings.Join(selectorProblems(tc.s, exported, jobs), "; ")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%v: problems %q, want %q", tc.s, got, tc.want)
		}
	}
	if registered("olmguard_no_such_metric") {
		t.Error("registered(olmguard_no_such_metric) = true")
	}
	if !registered("olmguard_webhook_requests_total") {
		t.Error("registered(olmguard_webhook_requests_total) = false")
	}
}
