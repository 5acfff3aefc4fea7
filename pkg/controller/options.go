package controller

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

// OperandCleanup says when the custom resources of an uninstalled operator are deleted.
type OperandCleanup string

const (
	// OperandCleanupOptIn deletes operands only for CSVs with spec.cleanup.enabled: true.
	OperandCleanupOptIn OperandCleanup = "opt-in"
	// OperandCleanupAlways deletes operands on every confirmed uninstall.
	OperandCleanupAlways OperandCleanup = "always"
	// OperandCleanupNever never deletes operands.
	OperandCleanupNever OperandCleanup = "never"
)

func (m OperandCleanup) String() string { return string(m) }

// Set implements flag.Value and accepts only the three modes.
func (m *OperandCleanup) Set(s string) error {
	switch v := OperandCleanup(s); v {
	case OperandCleanupOptIn, OperandCleanupAlways, OperandCleanupNever:
		*m = v
		return nil
	}
	return fmt.Errorf("must be one of %s, %s, %s", OperandCleanupOptIn, OperandCleanupAlways, OperandCleanupNever)
}

// Options configure the controller. Every field is a flag.
type Options struct {
	LeaderElect             bool
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election. A leader that cannot
	// renew within RenewDeadline (e.g. while the kube-apiserver restarts) stops, and its process
	// exits: the defaults ride out a 40 s apiserver outage, at the cost of a 60 s takeover when a
	// leader crashes (a graceful stop releases the Lease at once).
	LeaseDuration          time.Duration
	RenewDeadline          time.Duration
	RetryPeriod            time.Duration
	HealthProbeBindAddress string
	MetricsBindAddress     string
	// MetricsSecure serves /metrics over HTTPS to authenticated, authorized callers only.
	MetricsSecure bool
	// CatalogPodGrace is how long a catalog pod may sit on a NotReady or unreachable node before
	// it is force-deleted (F5).
	CatalogPodGrace time.Duration
	// CatalogPodDeletionsPerMinute rate limits those deletions.
	CatalogPodDeletionsPerMinute int
	// CleanupTimeout bounds an uninstall cleanup; then the finalizer is released with a Warning (F3).
	CleanupTimeout time.Duration
	// OperandCleanup chooses when operands are deleted on uninstall (F3).
	OperandCleanup OperandCleanup
	// DriftWindow is how long a Subscription may disagree with its InstallPlan before it is
	// reported and nudged (F2).
	DriftWindow time.Duration
	// UnpackJobTTL is the ttlSecondsAfterFinished given to finished unpack Jobs (F4).
	UnpackJobTTL time.Duration
	// Controllers names the reconcilers to run; empty runs all of them.
	Controllers []string
}

// DefaultOptions returns the flag defaults.
func DefaultOptions() Options {
	return Options{
		LeaderElectionNamespace:      olmguard.DefaultNamespace,
		LeaseDuration:                60 * time.Second,
		RenewDeadline:                40 * time.Second,
		RetryPeriod:                  5 * time.Second,
		HealthProbeBindAddress:       ":8081",
		MetricsBindAddress:           ":8080",
		MetricsSecure:                true,
		CatalogPodGrace:              30 * time.Second,
		CatalogPodDeletionsPerMinute: 10,
		CleanupTimeout:               10 * time.Minute,
		OperandCleanup:               OperandCleanupOptIn,
		DriftWindow:                  30 * time.Second,
		UnpackJobTTL:                 10 * time.Minute,
	}
}

// BindFlags registers the flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "elect a leader among replicas (Lease "+olmguard.ControllerLeaderElectionID+"); only the leader reconciles")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "namespace of the leader election Lease")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "how long non-leaders wait before taking over a Lease that was not renewed")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "how long the leader keeps trying to renew (e.g. through a kube-apiserver restart) before it gives up and exits")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "how often leader election clients retry")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, `address of /healthz and /readyz ("0" disables)`)
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, `address of /metrics ("0" disables)`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve /metrics over HTTPS, only to callers the kube-apiserver authenticates and allows get on /metrics")
	fs.DurationVar(&o.CatalogPodGrace, "catalog-pod-grace", o.CatalogPodGrace, "how long a catalog pod may sit on a NotReady or unreachable node before it is force-deleted")
	fs.IntVar(&o.CatalogPodDeletionsPerMinute, "catalog-pod-deletions-per-minute", o.CatalogPodDeletionsPerMinute, "maximum catalog pod force-deletions per minute")
	fs.DurationVar(&o.CleanupTimeout, "cleanup-timeout", o.CleanupTimeout, "how long an uninstall cleanup may take before its finalizer is released with a Warning event")
	fs.Var(&o.OperandCleanup, "operand-cleanup", "when to delete an uninstalled operator's custom resources: opt-in (CSVs with spec.cleanup.enabled: true), always, never")
	fs.DurationVar(&o.DriftWindow, "drift-window", o.DriftWindow, "how long a Subscription may disagree with its InstallPlan before the drift is reported")
	fs.DurationVar(&o.UnpackJobTTL, "unpack-job-ttl", o.UnpackJobTTL, "time-to-live of finished bundle unpack Jobs")
	fs.Func("controllers", "comma-separated reconcilers to run, all when empty: installplan-owners, subscription-drift, csv-cleanup, unpack-jobs, catalog-pods", func(v string) error {
		o.Controllers = nil
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				o.Controllers = append(o.Controllers, name)
			}
		}
		if len(o.Controllers) == 0 {
			return errors.New("lists no reconciler")
		}
		return nil
	})
}

// Selected returns the setups Controllers names (all when it is empty), or an error naming an
// unknown reconciler.
func (o *Options) Selected(all []Setup) ([]Setup, error) {
	if len(o.Controllers) == 0 {
		return all, nil
	}
	byName := map[string]Setup{}
	names := make([]string, 0, len(all))
	for _, s := range all {
		byName[s.Name] = s
		names = append(names, s.Name)
	}
	var out []Setup
	for _, n := range o.Controllers {
		s, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("--controllers: unknown reconciler %q (known: %s)", n, strings.Join(names, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	if errs := validation.IsDNS1123Label(o.LeaderElectionNamespace); len(errs) > 0 {
		return fmt.Errorf("--leader-election-namespace %q: %s", o.LeaderElectionNamespace, strings.Join(errs, "; "))
	}
	// client-go's leader election refuses other timings at start; say so before.
	if o.RetryPeriod <= 0 || float64(o.RenewDeadline) <= 1.2*float64(o.RetryPeriod) || o.LeaseDuration <= o.RenewDeadline {
		return fmt.Errorf("leader election timings: want --leader-elect-lease-duration (%s) > --leader-elect-renew-deadline (%s) > 1.2 × --leader-elect-retry-period (%s) > 0",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
	}
	if err := validateBindAddress(o.HealthProbeBindAddress); err != nil {
		return fmt.Errorf("--health-probe-bind-address: %w", err)
	}
	if err := validateBindAddress(o.MetricsBindAddress); err != nil {
		return fmt.Errorf("--metrics-bind-address: %w", err)
	}
	for _, d := range []struct {
		flag     string
		v, least time.Duration
	}{
		{"catalog-pod-grace", o.CatalogPodGrace, time.Second},
		{"cleanup-timeout", o.CleanupTimeout, time.Second},
		{"drift-window", o.DriftWindow, time.Second},
		// OLM must read a finished unpack Job's outcome before the TTL controller deletes it.
		{"unpack-job-ttl", o.UnpackJobTTL, time.Minute},
	} {
		if d.v < d.least {
			return fmt.Errorf("--%s %s must be at least %s", d.flag, d.v, d.least)
		}
	}
	if o.CatalogPodDeletionsPerMinute < 1 {
		return fmt.Errorf("--catalog-pod-deletions-per-minute %d must be at least 1", o.CatalogPodDeletionsPerMinute)
	}
	var m OperandCleanup
	if err := m.Set(string(o.OperandCleanup)); err != nil {
		return fmt.Errorf("--operand-cleanup %q: %w", o.OperandCleanup, err)
	}
	return nil
}

// validateBindAddress accepts "0" (disabled) or host:port.
func validateBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return fmt.Errorf("%q is not host:port or \"0\"", addr)
	} else if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q has an invalid port", addr)
	}
	return nil
}

var errNoConfig = errors.New("controller: a rest config is required")
