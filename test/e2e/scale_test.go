package e2e

// The scale benchmark of docs/performance.md ("A cluster of 2,000 namespaces"), run by `make
// bench-scale`: a kwok cluster filled as a large shared OLM cluster is, measured at 2,000 and at
// 20,000 copied CSVs, with the code of two builds side by side when OLMGUARD_SCALE_BEFORE_BIN
// names the directory of an earlier build's binaries. It reports figures and fails only when a
// process exits, a step does not finish, or a request is not decided: never on a time.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
)

// The cluster the benchmark builds (issue 32): per namespace one operator of its own (an original
// CSV), ten Subscriptions and InstallPlans, and a copy of each AllNamespaces operator; Jobs and
// Pods spread over the first namespaces.
const (
	scaleGlobalOperators = 10
	scaleSubsPerNS       = 10
	scaleJobs            = 10000
	scalePods            = 5000
	scaleExampleBytes    = 40 << 10 // alm-examples of every CSV, original or copy
	scaleOperatorsNS     = "scale-operators"
	scaleGlobalNS        = "scale-global-operators" // openshift-operators-style: 200 Subscriptions
	scaleGlobalSubs      = 200
	scaleAdmissions      = 200 // per kind and mode
)

// envScaleFillOnly=1 fills the cluster and stops before any measurement.
const envScaleFillOnly = "OLMGUARD_SCALE_FILL_ONLY"

func scaleNamespaces() int {
	if n, err := strconv.Atoi(os.Getenv("OLMGUARD_SCALE_NAMESPACES")); err == nil && n > 0 {
		return n
	}
	return 2000
}

// scaleBuild is one build of olmguard's binaries under measurement.
type scaleBuild struct{ name, dir string }

// TestMeasureScale fills the cluster and measures each build at 2,000 and then 20,000 copies.
func TestMeasureScale(t *testing.T) {
	skipUnlessBench(t)
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 170*time.Minute)
	defer cancel()
	fast := fastClient(t, c)
	namespaces := scaleNamespaces()
	// An earlier build may take minutes to fill its caches at 20,000 copies: that is a figure.
	procs.ReadyTimeout = 15 * time.Minute
	t.Cleanup(func() { procs.ReadyTimeout = 2 * time.Minute })

	builds := []scaleBuild{}
	if dir := os.Getenv("OLMGUARD_SCALE_BEFORE_BIN"); dir != "" {
		builds = append(builds, scaleBuild{"before", dir})
	}
	builds = append(builds, scaleBuild{"now", procs.Binaries(t)})

	s := &scaleSeed{t: t, ctx: ctx, c: fast, namespaces: namespaces, examples: strings.Repeat("x", scaleExampleBytes)}
	s.base()
	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil { // the leader's lease
		t.Fatal(err)
	}
	t.Logf("RESULT scale cluster: %d namespaces, %d original CSVs, %d copied CSVs, %d Subscriptions, %d InstallPlans, %d Jobs, %d Pods, alm-examples %d KB on every CSV",
		namespaces, namespaces+scaleGlobalOperators, namespaces, namespaces*scaleSubsPerNS, namespaces*scaleSubsPerNS, scaleJobs, scalePods, scaleExampleBytes>>10)
	if os.Getenv(envScaleFillOnly) == "1" {
		// For profiling by hand: fill the whole cluster, measure nothing (with
		// OLMGUARD_KEEP_CLUSTER=1 the cluster stays, its kubeconfig printed).
		s.copies(1, scaleGlobalOperators)
		s.globalSubscriptions()
		t.Logf("scale cluster filled: %d copied CSVs; %s=1, nothing measured", namespaces*scaleGlobalOperators, envScaleFillOnly)
		return
	}
	for _, b := range builds {
		measureControllerAtScale(t, ctx, c, b, namespaces, scaleRun{})
		measureDoctorAtScale(t, ctx, c, b, namespaces)
	}

	s.copies(1, scaleGlobalOperators)
	copies := namespaces * scaleGlobalOperators
	t.Logf("RESULT scale cluster: %d copied CSVs now", copies)
	for _, b := range builds {
		measureControllerAtScale(t, ctx, c, b, copies, scaleRun{})
		measureDoctorAtScale(t, ctx, c, b, copies)
	}
	now := builds[len(builds)-1]
	measureControllerAtScale(t, ctx, c, now, copies, scaleRun{noAudit: true})
	measureControllerAtScale(t, ctx, c, now, copies, scaleRun{restart: true})
	// The caches' first list, page sizes against client-go's own list: a watch-list stream
	// (Kubernetes 1.35+ clients against an apiserver that offers it) or, without one, a single
	// list at resourceVersion 0 answered whole from the watch cache.
	for _, run := range []scaleRun{
		{label: "client-go's watch-list stream", args: []string{"--cache-list-page-size=0"}},
		{label: "client-go's list, no watch-list", args: []string{"--cache-list-page-size=0"}, env: map[string]string{"KUBE_FEATURE_WatchListClient": "false"}},
		{label: "pages of 500", args: []string{"--cache-list-page-size=500"}},
		{label: "pages of 25", args: []string{"--cache-list-page-size=25"}},
	} {
		run.noAudit = true
		measureControllerAtScale(t, ctx, c, now, copies, run)
	}

	s.globalSubscriptions()
	for _, b := range builds {
		measureWebhookAtScale(t, ctx, c, b)
	}
}

// scaleSeed creates the objects, many requests at a time.
type scaleSeed struct {
	t          *testing.T
	ctx        context.Context
	c          client.Client
	namespaces int
	examples   string
}

func scaleNS(i int) string { return fmt.Sprintf("scale-%04d", i) }

// run creates n objects with 16 workers, logging progress every 10 %.
func (s *scaleSeed) run(what string, n int, f func(i int) error) {
	s.t.Helper()
	start := time.Now()
	step := int64(max(n/10, 1))
	var done atomic.Int64
	err := parallel(n, 16, func(i int) error {
		if err := f(i); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s %d: %w", what, i, err)
		}
		if d := done.Add(1); d%step == 0 && d < int64(n) {
			s.t.Logf("  %s: %d of %d (%s)", what, d, n, time.Since(start).Round(time.Second))
		}
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Logf("%d %s in %s", n, what, time.Since(start).Round(time.Second))
}

// csv creates a CSV with the benchmark's alm-examples and the status OLM writes.
func (s *scaleSeed) csv(ns, name string, labels, annotations map[string]any, status map[string]any) error {
	anns := map[string]any{"alm-examples": s.examples, "capabilities": "Basic Install", "containerImage": "quay.io/example/operator:v1"}
	for k, v := range annotations {
		anns[k] = v
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
		"metadata": map[string]any{"namespace": ns, "name": name, "labels": labels, "annotations": anns},
		"spec": map[string]any{"displayName": name, "version": "1.0.0",
			"install": map[string]any{"strategy": "deployment", "spec": map[string]any{"deployments": []any{}}}},
	}}
	if err := s.c.Create(s.ctx, u); err != nil {
		return err
	}
	u.Object["status"] = status
	return s.c.Status().Update(s.ctx, u)
}

func globalOperator(k int) string { return fmt.Sprintf("global-op-%d.v1.0.0", k) }

// base creates everything but the copies of operators 1 to 9.
func (s *scaleSeed) base() {
	succeeded := map[string]any{"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors"}
	s.run("namespaces", s.namespaces+2, func(i int) error {
		name := scaleOperatorsNS
		switch {
		case i < s.namespaces:
			name = scaleNS(i)
		case i == s.namespaces+1:
			name = scaleGlobalNS
		}
		return s.c.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	og := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
		"metadata": map[string]any{"namespace": scaleOperatorsNS, "name": "global-operators"}, "spec": map[string]any{}}}
	if err := s.c.Create(s.ctx, og); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	s.run("AllNamespaces operators' CSVs", scaleGlobalOperators, func(k int) error {
		return s.csv(scaleOperatorsNS, globalOperator(k), nil, map[string]any{olm.OperatorNamespaceAnnotation: scaleOperatorsNS}, succeeded)
	})
	s.run("original CSVs (one operator per namespace)", s.namespaces, func(i int) error {
		return s.csv(scaleNS(i), "tenant-op.v1.0.0", nil, map[string]any{olm.OperatorNamespaceAnnotation: scaleNS(i)}, succeeded)
	})
	s.copies(0, 1)
	s.run(fmt.Sprintf("namespaces' %d Subscriptions and InstallPlans", scaleSubsPerNS), s.namespaces, func(i int) error {
		var owners []any
		for k := range scaleSubsPerNS {
			sub, err := s.subscription(scaleNS(i), k)
			if err != nil {
				return err
			}
			owners = append(owners, map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
				"name": sub.GetName(), "uid": string(sub.GetUID())})
		}
		for k := range scaleSubsPerNS {
			if err := s.installPlan(scaleNS(i), k, owners); err != nil {
				return err
			}
		}
		return nil
	})
	s.run("Jobs", scaleJobs, func(i int) error {
		return s.c.Create(s.ctx, builders.SuspendedJob(scaleNS(i%s.namespaces), fmt.Sprintf("job-%d", i)))
	})
	s.run("Pods", scalePods, func(i int) error {
		return s.c.Create(s.ctx, builders.UnscheduledPod(scaleNS(i%s.namespaces), fmt.Sprintf("pod-%d", i)))
	})
}

// copies creates OLM's copies of AllNamespaces operators [from, to) in every namespace: the
// original's annotations, label olm.copiedFrom, status.reason Copied.
func (s *scaleSeed) copies(from, to int) {
	copied := map[string]any{"phase": "Succeeded", "reason": "Copied", "message": "The operator is running in " + scaleOperatorsNS + " but is managing this namespace"}
	per := to - from
	s.run(fmt.Sprintf("copied CSVs of operators %d-%d", from, to-1), s.namespaces*per, func(i int) error {
		return s.csv(scaleNS(i/per), globalOperator(from+i%per), map[string]any{olm.CopiedFromLabel: scaleOperatorsNS},
			map[string]any{olm.OperatorNamespaceAnnotation: scaleOperatorsNS, "olm.targetNamespaces": ""}, copied)
	})
}

func (s *scaleSeed) subscription(ns string, k int) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("pkg-%d", k)},
		"spec": map[string]any{"name": fmt.Sprintf("pkg-%d", k), "channel": "stable", "source": "catalog",
			"sourceNamespace": "olm", "installPlanApproval": "Automatic"}}}
	if err := s.c.Create(s.ctx, u); err != nil {
		return nil, err
	}
	csv := fmt.Sprintf("pkg-%d.v1.0.0", k)
	u.Object["status"] = map[string]any{"state": "AtLatestKnown", "currentCSV": csv, "installedCSV": csv,
		"installPlanGeneration": int64(1), "lastUpdated": time.Now().UTC().Format(time.RFC3339),
		"installPlanRef": map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "namespace": ns, "name": fmt.Sprintf("install-%d", k)}}
	return u, s.c.Status().Update(s.ctx, u)
}

// installPlan creates plan install-k, owned by every Subscription of the namespace as OLM's
// createInstallPlan writes it (nothing for F1 to repair), Complete.
func (s *scaleSeed) installPlan(ns string, k int, owners []any) error {
	csv := fmt.Sprintf("pkg-%d.v1.0.0", k)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
		"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("install-%d", k), "ownerReferences": owners},
		"spec":     map[string]any{"clusterServiceVersionNames": []any{csv}, "approval": "Automatic", "approved": true, "generation": int64(1)}}}
	if err := s.c.Create(s.ctx, u); err != nil {
		return err
	}
	u.Object["status"] = map[string]any{"phase": "Complete", "catalogSources": []any{},
		"plan": []any{map[string]any{"resolving": csv, "status": "Created", "resource": map[string]any{
			"group": "operators.coreos.com", "version": "v1alpha1", "kind": "ClusterServiceVersion", "name": csv,
			"sourceName": "catalog", "sourceNamespace": "olm", "manifest": "{}"}}}}
	return s.c.Status().Update(s.ctx, u)
}

// globalSubscriptions fills the openshift-operators-style namespace: an AllNamespaces
// OperatorGroup and 200 Subscriptions of distinct packages.
func (s *scaleSeed) globalSubscriptions() {
	og := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
		"metadata": map[string]any{"namespace": scaleGlobalNS, "name": "global-operators"}, "spec": map[string]any{}}}
	if err := s.c.Create(s.ctx, og); err != nil && !apierrors.IsAlreadyExists(err) {
		s.t.Fatal(err)
	}
	s.run("Subscriptions in "+scaleGlobalNS, scaleGlobalSubs, func(i int) error {
		_, err := s.subscription(scaleGlobalNS, i)
		return err
	})
}

// inCgroup returns the directory to start binary bin of build b from so that it runs in a new
// memory cgroup, and the cgroup (nil where the machine has none: figures then say n/a).
func inCgroup(t *testing.T, b scaleBuild, bin, label string) (string, *procs.MemCgroup) {
	g, err := procs.NewMemCgroup(fmt.Sprintf("%s-%s-%d", bin, label, time.Now().UnixNano()))
	if err != nil {
		t.Logf("no cgroup working set: %v", err)
		return b.dir, nil
	}
	dir, err := g.Wrap(b.dir, bin)
	if err != nil {
		t.Fatal(err)
	}
	g.Sample(250 * time.Millisecond)
	return dir, g
}

func cgroupFigures(g *procs.MemCgroup) string {
	if g == nil {
		return "cgroup n/a"
	}
	ws := g.PeakWorkingSet()
	peak, err := g.PeakUsage()
	if err != nil {
		return "cgroup: " + err.Error()
	}
	return fmt.Sprintf("cgroup peak working set %d MiB (peak usage %d MiB)", ws>>20, peak>>20)
}

// measureControllerAtScale starts build b's controller with GOMEMLIMIT=256MiB (its pod's limit)
// and reports its peak RSS and cgroup working set, the time to caches synced and to the first
// full reconcile pass, and with the audit the first audit's duration. restart then kills it and
// times a new process back to serving (its lease held by the dead one, as after an OOM kill).
func measureControllerAtScale(t *testing.T, ctx context.Context, c *cluster.Cluster, b scaleBuild, copies int, run scaleRun) {
	t.Helper()
	label := fmt.Sprintf("%s, %d copies", b.name, copies)
	args := append([]string{"--leader-elect", "--metrics-secure=false"}, run.args...)
	audit, restart := !run.noAudit, run.restart
	if !audit {
		args = append(args, "--controllers=installplan-owners,subscription-drift,csv-cleanup,unpack-jobs,catalog-pods")
		label += ", without olm-audit"
	}
	if run.label != "" {
		label += ", " + run.label
	}
	t.Setenv("GOMEMLIMIT", "256MiB")
	for k, v := range run.env {
		t.Setenv(k, v)
	}
	defer func() {
		for k := range run.env {
			if err := os.Unsetenv(k); err != nil {
				t.Error(err)
			}
		}
	}()
	r := startMeasuredController(t, c, b, label, args)
	if r == nil {
		return
	}
	defer r.stop()
	synced, pass, err := r.waitServing(t, ctx)
	if err != nil {
		r.reportExit(t, label, err)
		return
	}
	line := fmt.Sprintf("caches synced %s, first full reconcile pass %s after start", synced.Round(100*time.Millisecond), pass.Round(100*time.Millisecond))
	if audit {
		done, err := r.waitLog(t, ctx, "OLM audit done", 20*time.Minute)
		if err != nil {
			r.reportExit(t, label, err)
			return
		}
		line += fmt.Sprintf(", first OLM audit done %s after start", done.Round(100*time.Millisecond))
		// The cleanup tracker's pass (once per leadership, after the first reconcile pass) reads
		// every copy's metadata: the peak is read once it is done too, in builds that log it.
		tracked, found, err := r.findLog(t, ctx, "checked the CSVs labelled as copies", done+2*time.Minute)
		if err != nil {
			r.reportExit(t, label, err)
			return
		}
		if found {
			line += fmt.Sprintf(", cleanup tracker's pass done %s after start", tracked.Round(100*time.Millisecond))
		} else {
			line += ", no cleanup tracker's pass logged"
		}
	}
	if wait := 30*time.Second - time.Since(r.start); wait > 0 {
		time.Sleep(wait)
	}
	rss, err := r.p.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT controller (%s): peak RSS %d MiB, %s; %s", label, rss>>20, cgroupFigures(r.g), line)
	if !restart {
		return
	}
	r.p.Kill()
	again := startMeasuredController(t, c, b, label+", restarted", args)
	if again == nil {
		return
	}
	defer again.stop()
	synced, pass, err = again.waitServing(t, ctx)
	if err != nil {
		again.reportExit(t, label+", restarted", err)
		return
	}
	rss, err = again.p.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT controller restart (%s): killed with SIGKILL; the new process serving (leader, caches synced, workers started) %s after its start, first full reconcile pass %s; peak RSS %d MiB, %s",
		label, synced.Round(100*time.Millisecond), pass.Round(100*time.Millisecond), rss>>20, cgroupFigures(again.g))
}

// scaleRun is one start of the controller: without the periodic audit, killed and restarted
// after, with extra flags or environment.
type scaleRun struct {
	noAudit, restart bool
	label            string
	args             []string
	env              map[string]string
}

type measuredController struct {
	p       *procs.Process
	g       *procs.MemCgroup
	metrics string
	start   time.Time
}

func startMeasuredController(t *testing.T, c *cluster.Cluster, b scaleBuild, label string, args []string) *measuredController {
	t.Helper()
	port, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir, g := inCgroup(t, b, "controller", "c")
	m := &measuredController{g: g, metrics: fmt.Sprintf("127.0.0.1:%d", port), start: time.Now()}
	p, err := procs.StartController(dir, c.Kubeconfig, append(args, "--metrics-bind-address="+m.metrics)...)
	if err != nil {
		// Not ready within procs.ReadyTimeout, or exited: reported, and the benchmark goes on.
		rss := "n/a"
		if p != nil {
			if v, err := p.PeakRSS(); err == nil {
				rss = fmt.Sprintf("%d MiB", v>>20)
			}
		}
		t.Logf("RESULT controller (%s): not serving %s after start (%v); peak RSS %s, %s", label, time.Since(m.start).Round(time.Second), err, rss, cgroupFigures(g))
		if g != nil {
			g.Remove()
		}
		return nil
	}
	m.p = p
	return m
}

func (m *measuredController) stop() {
	m.p.Stop()
	if m.g != nil {
		m.g.PeakWorkingSet()
		m.g.Remove()
	}
}

// reportExit reports a controller that exited by itself, with its peak memory until then.
func (m *measuredController) reportExit(t *testing.T, label string, err error) {
	t.Helper()
	rss := "n/a"
	if v, rerr := m.p.PeakRSS(); rerr == nil {
		rss = fmt.Sprintf("%d MiB", v>>20)
	}
	t.Logf("RESULT controller (%s): not serving: %v; peak RSS %s, %s", label, err, rss, cgroupFigures(m.g))
}

// waitLog returns how long after start the controller's log first held msg.
func (m *measuredController) waitLog(t *testing.T, ctx context.Context, msg string, timeout time.Duration) (time.Duration, error) {
	t.Helper()
	at, found, err := m.findLog(t, ctx, msg, timeout)
	if err == nil && !found {
		t.Fatalf("no %q in the controller's log within %s; log in %s", msg, timeout, m.p.Log)
	}
	return at, err
}

// findLog is waitLog for a message a build may not log: found is false once timeout has passed.
func (m *measuredController) findLog(t *testing.T, ctx context.Context, msg string, timeout time.Duration) (at time.Duration, found bool, err error) {
	t.Helper()
	for time.Since(m.start) < timeout {
		if m.p.Exited() {
			return 0, false, fmt.Errorf("%w %s after start; log in %s", errExited, time.Since(m.start).Round(time.Second), m.p.Log)
		}
		b, err := os.ReadFile(m.p.Log)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(`"msg":"`+msg)) {
			return time.Since(m.start), true, nil
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return 0, false, nil
}

// waitServing returns when every controller had started its workers (its caches synced, as
// leader), and when every work queue was first empty with no reconcile running after that.
// errExited: the process under measurement exited by itself (an earlier build whose caches do
// not sync in time gives up): a figure to report, not a failure of the benchmark.
var errExited = errors.New("exited")

func (m *measuredController) waitServing(t *testing.T, ctx context.Context) (synced, pass time.Duration, err error) {
	t.Helper()
	for synced == 0 || pass == 0 {
		if m.p.Exited() {
			return synced, pass, fmt.Errorf("%w %s after start; log in %s", errExited, time.Since(m.start).Round(time.Second), m.p.Log)
		}
		if time.Since(m.start) > 20*time.Minute {
			t.Fatalf("controller not serving within 20 minutes; log in %s", m.p.Log)
		}
		if synced == 0 {
			b, err := os.ReadFile(m.p.Log)
			if err != nil {
				t.Fatal(err)
			}
			started := bytes.Count(b, []byte(`"msg":"Starting Controller"`))
			if started > 0 && bytes.Count(b, []byte(`"msg":"Starting workers"`)) == started {
				synced = time.Since(m.start)
			}
		} else if idle, err := queuesIdle(m.metrics); err != nil {
			t.Fatal(err)
		} else if idle {
			pass = time.Since(m.start)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	return synced, pass, nil
}

// queuesIdle reads the controller's /metrics: every workqueue_depth and every
// controller_runtime_active_workers at 0.
func queuesIdle(addr string) (bool, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return false, nil // not serving yet
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	seen := false
	for _, line := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(line, "workqueue_depth{") && !strings.HasPrefix(line, "controller_runtime_active_workers{") {
			continue
		}
		seen = true
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err != nil || v != 0 {
			return false, err
		}
	}
	return seen, nil
}

// measureDoctorAtScale runs `kubectl olmguard doctor -A -o json` of build b and reports its wall time,
// peak RSS (the kernel's maxrss of the process) and the List pages it sent.
func measureDoctorAtScale(t *testing.T, ctx context.Context, c *cluster.Cluster, b scaleBuild, copies int) {
	t.Helper()
	plugin := filepath.Join(b.dir, "kubectl-olmguard")
	args := []string{"doctor", "--kubeconfig", c.Kubeconfig, "-o", "json"}
	if hasAllNamespaces(t, ctx, plugin) { // every namespace: -A once doctor follows kubectl's namespace rule; builds before it audited all
		args = append(args, "-A")
	}
	cmd := exec.CommandContext(ctx, plugin, args...)
	// As an administrator runs it: not under the GOMEMLIMIT the controller's and the webhook's
	// measurements set for their pods (it would replace the plugin's own soft limit).
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GOMEMLIMIT=") })
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("doctor: %v", err)
	}
	var report struct {
		Findings []json.RawMessage `json:"findings"`
		Checked  map[string]int    `json:"checked"`
		Pages    map[string]int    `json:"pages"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		t.Fatalf("doctor's output: %v\nstderr: %s", err, stderr.String())
	}
	maxRSS := cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	pages := "pages not reported by this build"
	if report.Pages != nil {
		kinds := make([]string, 0, len(report.Pages))
		total := 0
		for k, n := range report.Pages {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			total += n
		}
		slices.Sort(kinds)
		pages = fmt.Sprintf("%d List pages (%s)", total, strings.Join(kinds, ", "))
	}
	t.Logf("RESULT doctor (%s, %d copies): wall %s, peak RSS %d MiB, %d findings, checked %v, %s",
		b.name, copies, took.Round(100*time.Millisecond), maxRSS>>20, len(report.Findings), report.Checked, pages)
}

// hasAllNamespaces reports whether the plugin's doctor has -A (--all-namespaces).
func hasAllNamespaces(t *testing.T, ctx context.Context, plugin string) bool {
	t.Helper()
	out, err := exec.CommandContext(ctx, plugin, "doctor", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s doctor --help: %v\n%s", plugin, err, out)
	}
	return bytes.Contains(out, []byte("--all-namespaces"))
}

// measureWebhookAtScale starts build b's webhook (GOMEMLIMIT=128MiB, its pod's limit) and times
// InstallPlan and Subscription CREATEs (dry run: the webhooks are called, nothing is stored) in
// the namespace of 200 Subscriptions, interleaved with the same requests in olmguard's own
// namespace, which the webhook configurations exclude.
func measureWebhookAtScale(t *testing.T, ctx context.Context, c *cluster.Cluster, b scaleBuild) {
	t.Helper()
	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOMEMLIMIT", "128MiB")
	dir, g := inCgroup(t, b, "webhook", "w")
	defer func() {
		if g != nil {
			g.PeakWorkingSet()
			g.Remove()
		}
	}()
	wh, err := procs.StartWebhook(dir, c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { wh.Stop(); removeWebhookConfigurations(t, c) }()
	waitWebhookActive(t, ctx, c)
	fast := fastClient(t, c)
	dry := client.DryRunAll
	type sample struct{ on, off []time.Duration }
	plan := func(ns string, i int) client.Object {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
			"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("bench-%d", i)},
			"spec":     map[string]any{"clusterServiceVersionNames": []any{"x.v1"}, "approval": "Automatic", "approved": true}}}
	}
	sub := func(ns string, i int) client.Object {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
			"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("bench-%d", i)},
			"spec": map[string]any{"name": fmt.Sprintf("bench-pkg-%d", i), "channel": "stable", "source": "catalog",
				"sourceNamespace": "olm", "installPlanApproval": "Automatic"}}}
	}
	timed := func(o client.Object) time.Duration {
		start := time.Now()
		if err := fast.Create(ctx, o, dry); err != nil {
			t.Fatalf("dry-run create %s/%s: %v", o.GetNamespace(), o.GetName(), err)
		}
		return time.Since(start)
	}
	// isolated: 200 ms before each request served by the webhook, as OLM creates plans one at a
	// time (its muInstallPlan); burst: back to back, where a consistent read waits for the
	// apiserver's next progress notification (docs/performance.md, "the F1 read").
	for _, arrival := range []struct {
		name string
		gap  time.Duration
	}{{"isolated", 200 * time.Millisecond}, {"burst", 0}} {
		kinds := map[string]*sample{"InstallPlan CREATE": {}, "Subscription CREATE": {}}
		for i := range scaleAdmissions {
			for name, build := range map[string]func(string, int) client.Object{"InstallPlan CREATE": plan, "Subscription CREATE": sub} {
				s := kinds[name]
				time.Sleep(arrival.gap)
				// Alternate which mode goes first, so neither always follows the other.
				if i%2 == 0 {
					s.on = append(s.on, timed(build(scaleGlobalNS, i)))
					s.off = append(s.off, timed(build(olmguard.DefaultNamespace, i)))
				} else {
					s.off = append(s.off, timed(build(olmguard.DefaultNamespace, i)))
					s.on = append(s.on, timed(build(scaleGlobalNS, i)))
				}
			}
		}
		for _, name := range []string{"InstallPlan CREATE", "Subscription CREATE"} {
			s := kinds[name]
			t.Logf("RESULT webhook (%s) %s, %s, with %d Subscriptions in the namespace, %d dry-run requests: on p50 %s p99 %s, off p50 %s p99 %s",
				b.name, name, arrival.name, scaleGlobalSubs, scaleAdmissions, pct(s.on, 50), pct(s.on, 99), pct(s.off, 50), pct(s.off, 99))
		}
	}
	if wh.Exited() {
		t.Fatalf("webhook exited; log in %s", wh.Log)
	}
	rss, err := wh.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("RESULT webhook (%s): peak RSS %d MiB, %s", b.name, rss>>20, cgroupFigures(g))
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	return s[min(max(i-1, 0), len(s)-1)].Round(10 * time.Microsecond)
}
