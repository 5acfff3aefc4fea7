package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/memlimit"
	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/controller/reachability"
	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/install"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestWebhookProbe (issue 35 item 5): with every webhook failing open, a webhook the
// kube-apiserver cannot reach is silent. The controller, run as its ServiceAccount with the
// manifests' RBAC and the probe every second, exports olmguard_webhook_reachable 1 while the
// kube-apiserver calls the webhook; once the webhook configuration points at a port nothing serves
// (as a NetworkPolicy, a firewall or a wrong Service leaves it) the gauge turns 0, failures are
// counted, a Warning Event WebhookNotCalled is recorded and doctor reports WebhookNotCalled; once
// restored, the gauge is 1 again with a Normal Event WebhookCalledAgain and doctor is quiet.
func TestWebhookProbe(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t) // the binaries run out of cluster: the apiserver must reach 127.0.0.1
	ctx := context.Background()
	objs, err := manifests.Objects("self-signed", "")
	if err != nil {
		t.Fatal(err)
	}
	install.ApplyRBAC(t, ctx, c, objs)
	port, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", port)
	start := time.Now().Add(-time.Second)
	o := install.StartAsServiceAccounts(t, ctx, c, install.Options{ControllerArgs: []string{
		"--controllers=" + reachability.Name, "--webhook-probe-interval=1s",
		"--metrics-bind-address=" + metricsAddr, "--metrics-secure=false"}})

	reachable := func(want float64) func(ctx context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			got, err := scrape(ctx, metricsAddr, "olmguard_webhook_reachable")
			return err == nil && got == want, fmt.Sprintf("olmguard_webhook_reachable %v (%v)", got, err), nil
		}
	}
	testenv.EventuallyExplained(t, "the probe sees the webhook called", reachable(1))
	checkCollectorPace(t, ctx, metricsAddr)
	if code, findings := doctorWebhookFindings(t, ctx, c); len(findings) != 0 {
		t.Errorf("doctor (exit %d) with the webhook called: %+v", code, findings)
	}

	// The kube-apiserver can no longer reach the webhook: every entry's URL names a port nothing serves.
	dead, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	setWebhookURLs(t, ctx, c, "https://"+o.WebhookAddress, fmt.Sprintf("https://127.0.0.1:%d", dead))
	restored := false
	restore := func() {
		if !restored {
			restored = true
			setWebhookURLs(t, ctx, c, fmt.Sprintf("https://127.0.0.1:%d", dead), "https://"+o.WebhookAddress)
		}
	}
	t.Cleanup(restore)
	testenv.EventuallyExplained(t, "the probe sees the webhook not called", reachable(0))
	if n, err := scrape(ctx, metricsAddr, `olmguard_webhook_probe_failures_total{outcome="NotCalled"}`); err != nil || n < 1 {
		t.Errorf("olmguard_webhook_probe_failures_total{outcome=\"NotCalled\"} = %v (%v), want at least 1", n, err)
	}
	waitProbeEvent(t, c, reachability.ReasonNotCalled, start)
	code, findings := doctorWebhookFindings(t, ctx, c)
	if len(findings) != 1 || code != 1 {
		t.Errorf("doctor (exit %d) with the webhook not called: %+v, want one %s and exit 1", code, findings, doctor.WebhookNotCalledCheck)
	}

	restore()
	testenv.EventuallyExplained(t, "the probe sees the webhook called again", reachable(1))
	waitProbeEvent(t, c, reachability.ReasonCalled, start)
	if last, err := scrape(ctx, metricsAddr, "olmguard_webhook_probe_last_success_timestamp_seconds"); err != nil || last < float64(start.Unix()) {
		t.Errorf("olmguard_webhook_probe_last_success_timestamp_seconds = %v (%v), want after %d", last, err, start.Unix())
	}
	if code, findings := doctorWebhookFindings(t, ctx, c); len(findings) != 0 {
		t.Errorf("doctor (exit %d) with the webhook called again: %+v", code, findings)
	}
	// The manifests' RBAC is enough: the dry run is authorized as a create.
	if b, err := os.ReadFile(o.Controller.Log); err != nil {
		t.Error(err)
	} else if m := procs.PermissionDenied.Find(b); m != nil {
		t.Errorf("the controller was refused a request (%q): its RBAC misses the probe's create; log %s", m, o.Controller.Log)
	}
}

// setWebhookURLs replaces the base URL from by to in every webhook of olmguard's mutating
// configuration.
func setWebhookURLs(t *testing.T, ctx context.Context, c *cluster.Cluster, from, to string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, cfg); err != nil {
			return err
		}
		for i := range cfg.Webhooks {
			u := ptr.Deref(cfg.Webhooks[i].ClientConfig.URL, "")
			if !strings.HasPrefix(u, from+"/") {
				return fmt.Errorf("webhook %s calls %q, not %s", cfg.Webhooks[i].Name, u, from)
			}
			cfg.Webhooks[i].ClientConfig.URL = ptr.To(to + strings.TrimPrefix(u, from))
		}
		return c.Client.Update(ctx, cfg)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// doctorWebhookFindings runs doctor over the whole cluster and returns its exit status and its
// WebhookNotCalled findings.
func doctorWebhookFindings(t *testing.T, ctx context.Context, c *cluster.Cluster) (int, []doctor.Finding) {
	t.Helper()
	code, out, errOut := runDoctor(t, ctx, c, "-A", "-o", "json")
	var report doctor.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("doctor -o json (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	var found []doctor.Finding
	for _, f := range report.Findings {
		if f.Check == doctor.WebhookNotCalledCheck {
			found = append(found, f)
		}
	}
	for _, s := range report.Skipped {
		if strings.HasPrefix(s, "webhook probe") {
			t.Errorf("doctor skipped the webhook probe: %s", s)
		}
	}
	return code, found
}

// waitProbeEvent waits for an Event of reason on olmguard's mutating webhook configuration, its
// UID included (kubectl describe finds Events by UID), recorded after since (cluster-scoped: in
// namespace default).
func waitProbeEvent(t *testing.T, c *cluster.Cluster, reason string, since time.Time) {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, cfg); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Event "+reason+" on "+olmguard.MutatingWebhookConfigurationName, func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := c.Client.List(ctx, events, client.InNamespace(corev1.NamespaceDefault)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			at := e.EventTime.Time
			if at.IsZero() {
				at = e.LastTimestamp.Time
			}
			if e.Reason == reason && e.InvolvedObject.Kind == "MutatingWebhookConfiguration" &&
				e.InvolvedObject.Name == olmguard.MutatingWebhookConfigurationName && e.InvolvedObject.UID == cfg.UID && !at.Before(since) {
				return true, nil
			}
		}
		return false, nil
	})
}

// scrape reads one sample of the plain-text /metrics at addr: series is the metric name with its
// labels as the exposition format writes them.
func scrape(ctx context.Context, addr, series string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no sample %s", series)
}

// checkCollectorPace: the controller runs its collector at controller.GCPercent, as its main sets
// it, unless GOGC is set in its environment (failed before: nothing checked that main set it; at
// Go's default of 100 the scale benchmark's peak was 30 MiB higher).
func checkCollectorPace(t *testing.T, ctx context.Context, metricsAddr string) {
	t.Helper()
	want := float64(controller.GCPercent)
	if env := os.Getenv(memlimit.GCPercentEnv); env != "" {
		v, err := strconv.Atoi(env)
		if err != nil {
			t.Skipf("GOGC=%s in the environment decides the pace", env)
		}
		want = float64(v)
	}
	if got, err := scrape(ctx, metricsAddr, "go_gc_gogc_percent"); err != nil || got != want {
		t.Errorf("go_gc_gogc_percent = %v (%v), want %v", got, err, want)
	}
}
