// Package reachability is the controller's webhook-probe reconciler: every --webhook-probe-interval
// the leader asks the kube-apiserver for a server-side dry run (dryRun=All: nothing is stored) of
// the creation of a probe ConfigMap in olmguard's namespace, which olmguard's mutating webhook
// marks (pkg/webhookprobe). An answer without the mark means the kube-apiserver did not call the
// webhook: with failurePolicy Ignore every admission then goes through unguarded, silently. The
// result is exported (olmguard_webhook_reachable, olmguard_webhook_probe_failures_total,
// olmguard_webhook_probe_last_success_timestamp_seconds), logged, and each change is recorded as
// an Event on the MutatingWebhookConfiguration, so that alert OlmguardWebhookNotCalled fires.
package reachability

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
)

// Name of the reconciler in --controllers and in its log lines.
const Name = "webhook-probe"

// Event reasons, on the MutatingWebhookConfiguration olmguard-mutating.
const (
	// ReasonNotCalled (Warning): a probe saw the kube-apiserver not call the webhook, or fail the
	// dry run, after a probe that saw it called, or StartupGrace after the first probe without a
	// probe that saw it called.
	ReasonNotCalled = "WebhookNotCalled"
	// ReasonCalled (Normal): a probe saw the kube-apiserver call the webhook again, after a
	// WebhookNotCalled.
	ReasonCalled = "WebhookCalledAgain"
)

// StartupGrace is how long after its first probe the prober waits, while it has not yet seen the
// webhook called, before it records WebhookNotCalled: on a fresh install (and on a rollout of
// both Deployments) the controller usually leads before the webhook's pods serve, and a Warning
// followed a minute later by WebhookCalledAgain would tell a new user something is wrong when
// nothing is. The gauge and the failure counter report every probe as it is meanwhile (alert
// OlmguardWebhookNotCalled waits 5 minutes).
const StartupGrace = 2 * time.Minute

// Options are the probe's settings.
type Options struct {
	// Interval is the time between two probes; the first runs when the replica becomes leader.
	Interval time.Duration
	// Namespace is olmguard's: the probe object's, the only one the webhook answers probes in.
	Namespace string
}

// DefaultOptions are the flag defaults: one dry-run create a minute, nothing stored.
func DefaultOptions() Options {
	return Options{Interval: time.Minute, Namespace: olmguard.DefaultNamespace}
}

var intervalFlag = flags.Duration{Name: "webhook-probe-interval", Least: time.Second,
	Usage: "time between two probes of the " + Name + " reconciler: a dry-run create olmguard's mutating webhook must mutate, which shows whether the kube-apiserver calls the webhook (olmguard_webhook_reachable)"}

// BindFlags registers the options' flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	intervalFlag.Bind(fs, &o.Interval)
	fs.StringVar(&o.Namespace, "webhook-probe-namespace", o.Namespace, "olmguard's namespace (the webhook's --namespace), where the "+Name+" reconciler dry-runs its probe ConfigMap")
}

// Validate reports the first invalid option.
func (o Options) Validate() error {
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("--webhook-probe-namespace %q: %v", o.Namespace, errs)
	}
	return intervalFlag.Check(o.Interval)
}

// CacheNeeds: the probe reads nothing through the cache.
func CacheNeeds() cacheneeds.Needs { return nil }

// Prober probes on the leader every Interval.
type Prober struct {
	// Client creates the probe object with dryRun=All.
	Client    client.Client
	Namespace string
	Interval  time.Duration
	Recorder  events.EventRecorder
	// Reader finds the MutatingWebhookConfiguration an Event is recorded on, with its UID, so
	// that kubectl describe shows the Event (list by name: the controller may list, not get,
	// webhook configurations); nil or not found records it by name only.
	Reader client.Reader
	// Now is the clock StartupGrace is measured on (nil: time.Now).
	Now func() time.Time
	// last is the previous probe's outcome, "" before the first; first is when the first probe
	// ran; seenCalled whether a probe has seen the webhook called; warned whether the last Event
	// is a WebhookNotCalled.
	last               webhookprobe.Outcome
	first              time.Time
	seenCalled, warned bool
}

// Add registers the prober with mgr, as a leader-only runnable.
func Add(mgr manager.Manager, o Options) error {
	return mgr.Add(&Prober{Client: mgr.GetClient(), Namespace: o.Namespace, Interval: o.Interval, Recorder: mgr.GetEventRecorder(Name), Reader: mgr.GetAPIReader()})
}

// NeedLeaderElection: one replica probes, so only one replica exports the gauge.
func (p *Prober) NeedLeaderElection() bool { return true }

// Start probes until ctx ends.
func (p *Prober) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName(Name)
	for _, o := range []webhookprobe.Outcome{webhookprobe.NotCalled, webhookprobe.Failed} {
		metrics.WebhookProbeFailures.WithLabelValues(string(o))
	}
	t := time.NewTicker(p.Interval)
	defer t.Stop()
	for {
		p.ProbeOnce(ctx, logger)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// probeTimeout bounds one dry run: the kube-apiserver's own call of the webhook is bounded by
// the configuration's timeoutSeconds (at most 30).
const probeTimeout = 30 * time.Second

// ProbeOnce runs one probe, exports its result, and logs and records a change.
func (p *Prober) ProbeOnce(ctx context.Context, logger logr.Logger) webhookprobe.Result {
	r := Probe(ctx, p.Client, p.Namespace)
	if ctx.Err() != nil {
		return r // shutting down: not the webhook's failure
	}
	if r.OK() {
		metrics.WebhookReachable.Set(1)
		metrics.WebhookProbeLastSuccess.SetToCurrentTime()
	} else {
		metrics.WebhookReachable.Set(0)
		metrics.WebhookProbeFailures.WithLabelValues(string(r.Outcome)).Inc()
	}
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	if p.first.IsZero() {
		p.first = now()
	}
	changed := r.Outcome != p.last
	p.last = r.Outcome
	msg := printable.Line(r.Message)
	switch {
	case r.OK() && p.warned:
		p.warned = false
		logger.Info("the kube-apiserver calls olmguard's webhook again", "outcome", r.Outcome)
		p.event(ctx, corev1.EventTypeNormal, ReasonCalled, msg)
	case r.OK() && !p.seenCalled:
		logger.Info("the kube-apiserver calls olmguard's webhook", "outcome", r.Outcome)
	case r.OK():
	case p.warned && !changed:
	case p.warned || p.seenCalled || now().Sub(p.first) >= StartupGrace:
		p.warned = true
		logger.Info("the kube-apiserver does not call olmguard's webhook: admissions go through unguarded", "outcome", r.Outcome, "message", msg,
			"runbook", "docs/alerts.md#olmguardwebhooknotcalled")
		p.event(ctx, corev1.EventTypeWarning, ReasonNotCalled, msg)
	case changed:
		logger.Info("the kube-apiserver does not call olmguard's webhook yet; its pods may still be starting", "outcome", r.Outcome, "message", msg,
			"warningAfter", StartupGrace.String())
	}
	p.seenCalled = p.seenCalled || r.OK()
	return r
}

// event records a change on the MutatingWebhookConfiguration (cluster-scoped: the Event is in
// the default namespace).
func (p *Prober) event(ctx context.Context, eventType, reason, note string) {
	if p.Recorder == nil {
		return
	}
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	cfg.Name = olmguard.MutatingWebhookConfigurationName
	if p.Reader != nil {
		list := &admissionregistrationv1.MutatingWebhookConfigurationList{}
		if err := p.Reader.List(ctx, list, client.MatchingFields{"metadata.name": cfg.Name}); err == nil && len(list.Items) == 1 {
			cfg = &list.Items[0]
		}
	}
	cfg.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind("MutatingWebhookConfiguration"))
	p.Recorder.Eventf(cfg, nil, eventType, reason, "Probe", "%s", note)
}

// Probe dry-runs the creation of the probe object in namespace and judges the answer
// (webhookprobe.Judge). It stores nothing. c needs create on ConfigMaps in namespace.
func Probe(ctx context.Context, c client.Client, namespace string) webhookprobe.Result {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	nonce := webhookprobe.Nonce()
	obj := webhookprobe.Object(namespace, nonce)
	err := c.Create(ctx, obj, client.DryRunAll, client.FieldOwner(olmguard.FieldManager))
	return webhookprobe.Judge(nonce, obj.GetAnnotations(), err)
}
