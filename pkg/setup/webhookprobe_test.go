package setup_test

// The webhook reachability probe through a real kube-apiserver: the dry run comes back marked
// while the apiserver calls the webhook, unmarked once it cannot reach it (the configuration's
// URL pointed at a port nothing serves, as a NetworkPolicy or a firewall would leave it), and
// marked again once restored; the reconciler exports each state and records each change.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/reachability"
	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
	"github.com/olmguard/olmguard/test/testenv"
)

const probeWebhookName = "webhook-probe.mutate.olmguard.io"

func TestWebhookProbe(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	rec := events.NewFakeRecorder(10)
	p := &reachability.Prober{Client: env.Client, Namespace: olmguard.DefaultNamespace, Recorder: rec}
	probe := func(want webhookprobe.Outcome) func(ctx context.Context) (bool, string, error) {
		return func(ctx context.Context) (bool, string, error) {
			r := p.ProbeOnce(ctx, logr.Discard())
			return r.Outcome == want, string(r.Outcome) + ": " + r.Message, nil
		}
	}
	testenv.EventuallyExplained(t, "the probe sees the webhook called", probe(webhookprobe.Called))
	report := &doctor.Report{}
	doctor.ProbeWebhook(ctx, env.Client, olmguard.DefaultNamespace, report)
	if len(report.Findings) != 0 || len(report.Skipped) != 0 || report.Checked["WebhookProbe"] != 1 {
		t.Errorf("doctor with the webhook called: %+v", report)
	}
	if got := testutil.ToFloat64(metrics.WebhookReachable); got != 1 {
		t.Errorf("olmguard_webhook_reachable = %v, want 1", got)
	}
	if testutil.ToFloat64(metrics.WebhookProbeLastSuccess) == 0 {
		t.Error("olmguard_webhook_probe_last_success_timestamp_seconds not set")
	}

	t.Run("nothing is stored and no tenant triggers the mark", func(t *testing.T) {
		// A stored ConfigMap carrying the mark in olmguard's namespace: not a dry run, not marked.
		cm := webhookprobe.Object(olmguard.DefaultNamespace, "abc")
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), cm) })
		if _, ok := cm.Annotations[olmguard.WebhookProbeAnswerAnnotation]; ok {
			t.Errorf("a stored ConfigMap was marked: %v", cm.Annotations)
		}
		// The same dry run in another namespace: not sent, not marked.
		other := testenv.FreshNamespace(t, env.Client, "probe-tenant")
		if r := reachability.Probe(ctx, env.Client, other); r.Outcome != webhookprobe.NotCalled {
			t.Errorf("a probe in namespace %s: %+v, want NotCalled", other, r)
		}
		list := &corev1.ConfigMapList{}
		if err := env.Client.List(ctx, list, client.InNamespace(olmguard.DefaultNamespace), client.HasLabels{olmguard.WebhookProbeLabel}); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 1 {
			t.Errorf("%d marked ConfigMaps stored, want only the test's one: the dry runs stored something", len(list.Items))
		}
	})

	// The apiserver can no longer reach the webhook: its URL's port serves nothing.
	restore := breakProbeWebhook(t, ctx)
	failures := testutil.ToFloat64(metrics.WebhookProbeFailures.WithLabelValues(string(webhookprobe.NotCalled)))
	testenv.EventuallyExplained(t, "the probe sees the webhook not called", probe(webhookprobe.NotCalled))
	if got := testutil.ToFloat64(metrics.WebhookReachable); got != 0 {
		t.Errorf("olmguard_webhook_reachable = %v, want 0", got)
	}
	if got := testutil.ToFloat64(metrics.WebhookProbeFailures.WithLabelValues(string(webhookprobe.NotCalled))); got <= failures {
		t.Errorf("olmguard_webhook_probe_failures_total{outcome=NotCalled} = %v, want more than %v", got, failures)
	}
	expectEvent(t, rec, "Warning "+reachability.ReasonNotCalled)
	// kubectl olmguard doctor runs the same probe and reports it.
	report = &doctor.Report{}
	doctor.ProbeWebhook(ctx, env.Client, olmguard.DefaultNamespace, report)
	if len(report.Findings) != 1 || report.Findings[0].Check != doctor.WebhookNotCalledCheck || len(report.Skipped) != 0 {
		t.Errorf("doctor: findings %+v, skipped %q; want one %s", report.Findings, report.Skipped, doctor.WebhookNotCalledCheck)
	}

	restore()
	testenv.EventuallyExplained(t, "the probe sees the webhook called again", probe(webhookprobe.Called))
	if got := testutil.ToFloat64(metrics.WebhookReachable); got != 1 {
		t.Errorf("olmguard_webhook_reachable = %v, want 1", got)
	}
	expectEvent(t, rec, "Normal "+reachability.ReasonCalled)
}

// expectEvent reads the fake recorder's Events up to one that starts with prefix.
func expectEvent(t *testing.T, rec *events.FakeRecorder, prefix string) {
	t.Helper()
	for {
		select {
		case e := <-rec.Events:
			if strings.HasPrefix(e, prefix) {
				return
			}
		default:
			t.Fatalf("no Event %q recorded", prefix)
		}
	}
}

// breakProbeWebhook points the probe's webhook at a port nothing serves and returns what puts
// the configuration back.
func breakProbeWebhook(t *testing.T, ctx context.Context) func() {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var saved string
	set := func(url func(old string) string) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := env.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, cfg); err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				if w := &cfg.Webhooks[i]; w.Name == probeWebhookName {
					w.ClientConfig.URL = ptr.To(url(ptr.Deref(w.ClientConfig.URL, "")))
					return env.Client.Update(ctx, cfg)
				}
			}
			return fmt.Errorf("no webhook %s in %s", probeWebhookName, cfg.Name)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	set(func(old string) string {
		saved = old
		return fmt.Sprintf("https://127.0.0.1:%d%s", dead, olmguard.MutateWebhookProbePath)
	})
	restored := false
	restore := func() {
		if !restored {
			restored = true
			set(func(string) string { return saved })
		}
	}
	t.Cleanup(restore)
	return restore
}
