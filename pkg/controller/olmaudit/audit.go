// Package olmaudit runs `kubectl olmguard doctor`'s checks in the controller every
// --audit-interval and exports what they find as metrics. The failures olmguard reports but
// cannot heal alone (an orphan CSV blocking resolution, a catalog pod OOMKilled, packageserver
// unavailable, two OperatorGroups in a namespace) then reach Prometheus and olmguard's alerts,
// not only whoever runs doctor.
package olmaudit

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/internal/queueidle"
	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/metrics"
)

// Name of the reconciler in --controllers and in its log lines.
const Name = "olm-audit"

// Options are the audit's settings.
type Options struct {
	// Interval is the time between two audits; the first runs when the replica becomes leader.
	Interval time.Duration
}

// DefaultOptions are the flag defaults. An audit lists Subscriptions, InstallPlans, CSVs (without
// OLM's copies), OperatorGroups, unpack Jobs, catalog pods, Nodes and CatalogSources once, a page
// at a time: every 10 minutes that is a small fraction of what OLM itself lists and watches.
func DefaultOptions() Options { return Options{Interval: 10 * time.Minute} }

// intervalFlag's bound keeps the audit's reads rare: doctor's thresholds count in minutes anyway.
var intervalFlag = flags.Duration{Name: "audit-interval", Least: time.Minute,
	Usage: "time between two OLM audits of the " + Name + " reconciler (kubectl olmguard doctor's checks, exported as olmguard_audit_findings)"}

// BindFlags registers the options' flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) { intervalFlag.Bind(fs, &o.Interval) }

// Validate reports the first invalid option.
func (o Options) Validate() error { return intervalFlag.Check(o.Interval) }

// auditOptions are doctor's defaults for a run nobody watches: no progress, smaller pages, and
// no copied CSVs. CSVs come 5 to a page: a page's body is read and decoded whole before the
// specs are dropped, and with 2,000 CSVs of 490 KB the controller peaked at 111 MiB with pages of
// 20 and 77 MiB with pages of 5, against 71 MiB without the audit (docs/performance.md).
func auditOptions() doctor.Options {
	o := doctor.DefaultOptions()
	o.PageSize = 250
	o.CSVPageSize = 5
	o.SubscriptionPageSize = 10 // 200 Subscriptions of 1 MiB: docs/performance.md
	o.SkipCopiedCSVs = true
	o.CopiedCSVsAbove = 0 // doctor's count of OLM's copies: namespaces and OLMConfig, which the controller may not read
	return o
}

// Auditor runs the audit on the leader, once the reconcilers' first pass is done (Idle) and then
// every Interval.
type Auditor struct {
	// Reader reads Subscriptions and InstallPlans from the manager's cache (CacheNeeds) and the
	// other kinds live: most are read nowhere else, and one paged list per interval costs less
	// than keeping them.
	Reader   client.Reader
	Interval time.Duration
	Options  doctor.Options
	// Idle, when set, reports whether the reconcilers are idle: the first audit waits for it
	// (queueidle.QueuesIdle, at most queueidle.MaxWait).
	Idle func() bool
	// known and skipped are the last audit's findings and skipped checks, so that each is
	// logged once, when it appears.
	known, skipped map[string]bool
}

// Add registers the auditor with mgr, as a leader-only runnable.
func Add(mgr manager.Manager, o Options) error {
	opts := auditOptions()
	opts.Shared = cacheObjects{Informers: mgr.GetCache()}
	return mgr.Add(&Auditor{Reader: mgr.GetAPIReader(), Interval: o.Interval, Options: opts, Idle: queueidle.QueuesIdle(ctrlmetrics.Registry)})
}

// NeedLeaderElection: one replica audits, so the gauges of only one replica are set.
func (a *Auditor) NeedLeaderElection() bool { return true }

// Start audits until ctx ends. A failed audit is logged and counted, and tried again at the
// next tick.
func (a *Auditor) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName(Name)
	metrics.AuditRuns.WithLabelValues(resultSuccess)
	metrics.AuditRuns.WithLabelValues(resultError)
	metrics.AuditInterval.Set(a.Interval.Seconds())
	if a.Idle != nil {
		queueidle.Wait(ctx, a.Idle, queueidle.Poll, queueidle.MaxWait)
	}
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		if err := a.RunOnce(ctx, logger); err != nil && ctx.Err() == nil {
			logger.Error(err, "OLM audit failed; trying again at the next interval", "interval", a.Interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

const (
	resultSuccess = "success"
	resultError   = "error"
)

// RunOnce audits the cluster, sets the audit's metrics and logs each finding that is new since the
// last audit.
func (a *Auditor) RunOnce(ctx context.Context, logger logr.Logger) error {
	o := a.Options
	o.Now = time.Now
	report, err := doctor.Audit(ctx, a.Reader, o)
	if err != nil {
		metrics.AuditRuns.WithLabelValues(resultError).Inc()
		return err
	}
	metrics.AuditFindings.Reset()
	for k, n := range Tally(report.Findings) {
		metrics.AuditFindings.WithLabelValues(string(k.Class), k.Check).Set(float64(n))
	}
	metrics.AuditSkippedChecks.Set(float64(len(report.Skipped)))
	metrics.AuditLastSuccess.SetToCurrentTime()
	metrics.AuditRuns.WithLabelValues(resultSuccess).Inc()

	now := map[string]bool{}
	for _, f := range report.Findings {
		id := FindingID(f)
		now[id] = true
		if !a.known[id] {
			logFinding(logger, f)
		}
	}
	skipped := map[string]bool{}
	for _, s := range report.Skipped {
		skipped[s] = true
		if !a.skipped[s] { // said once: a missing permission or kind does not fix itself
			logger.Info("OLM audit: checks skipped", "reason", printable.Line(s))
		}
	}
	a.skipped = skipped
	logger.Info("OLM audit done", "findings", len(report.Findings), "gone", len(a.known)-countKept(a.known, now), "checked", report.Checked)
	a.known = now
	return nil
}

// Key is one series of olmguard_audit_findings.
type Key struct {
	Class doctor.Class
	Check string
}

// Tally counts findings by class and check.
func Tally(findings []doctor.Finding) map[Key]int {
	out := map[Key]int{}
	for _, f := range findings {
		out[Key{f.Class, f.Check}]++
	}
	return out
}

// FindingID names one finding on one object, to tell new findings from known ones.
func FindingID(f doctor.Finding) string {
	return fmt.Sprintf("%s/%s/%s/%s/%s", f.Class, f.Check, f.Kind, f.Namespace, f.Name)
}

// countKept counts the findings of before that are still there now.
func countKept(before, now map[string]bool) int {
	return len(slices.DeleteFunc(slices.Collect(maps.Keys(before)), func(id string) bool { return !now[id] }))
}

// logFinding logs a new finding once: every field that holds what a tenant or OLM wrote (names,
// OLM's messages, the fix and its commands) escaped, so that a log reader's terminal shows escape
// sequences instead of acting on them.
func logFinding(logger logr.Logger, f doctor.Finding) {
	cmds := make([]string, len(f.Commands))
	for i, c := range f.Commands {
		cmds[i] = printable.Line(c)
	}
	logger.Info("OLM audit: "+printable.Line(f.Problem), "class", f.Class, "check", f.Check, "kind", f.Kind,
		"namespace", printable.Line(f.Namespace), "name", printable.Line(f.Name),
		"evidence", printable.Line(f.Evidence), "fix", printable.Line(f.Fix), "commands", cmds)
}
