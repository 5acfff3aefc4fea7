package controller

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// Options configure the controller's manager: leader election, probes, metrics and which
// reconcilers run. Every field is a flag. Each reconciler's own settings are its package's Options.
type Options struct {
	LeaderElect             bool
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod time the leader election. A standby takes over
	// from a crashed leader (or one on a lost node) within TakeoverBound; a graceful stop releases
	// the Lease at once. A leader that cannot renew within RenewDeadline (e.g. while the
	// kube-apiserver restarts) stops and its process exits, to be restarted by its kubelet.
	LeaseDuration          time.Duration
	RenewDeadline          time.Duration
	RetryPeriod            time.Duration
	HealthProbeBindAddress string
	MetricsBindAddress     string
	// MetricsSecure serves /metrics over HTTPS to authenticated, authorized callers only.
	MetricsSecure bool
	// PprofBindAddress serves Go's /debug/pprof ("0": off, the default): for measuring memory.
	PprofBindAddress string
	// Controllers names the reconcilers to run; empty runs all of them.
	Controllers []string
	// CacheListPageSize is how many objects one page of an informer's list holds; each page is
	// trimmed to what the reconcilers read before the next is read (internal/pagedlist). 0 leaves
	// the list to client-go: a watch-list stream where the apiserver offers one, else one list of
	// whole objects.
	CacheListPageSize int64
}

// DefaultOptions returns the flag defaults.
func DefaultOptions() Options {
	return Options{
		LeaderElectionNamespace: olmguard.DefaultNamespace,
		// F5's catalog recovery must not wait minutes when the lost node is the controller's own:
		// a standby takes over in at most TakeoverBound (18.8 s). 8 s of failed renewals (four
		// tries) before a leader gives up keeps load from costing it the Lease.
		LeaseDuration: 10 * time.Second,
		RenewDeadline: 8 * time.Second,
		RetryPeriod:   2 * time.Second,
		// Other ports than the webhook's (:8081, :8080), so both run on one host out of cluster.
		HealthProbeBindAddress: ":8082",
		MetricsBindAddress:     ":8083",
		MetricsSecure:          true,
		PprofBindAddress:       "0",
		// Chosen by the scale benchmark (docs/performance.md, "A cluster of 2,000 namespaces"):
		// a page of 40 KB CSVs is 4 MB of JSON.
		CacheListPageSize: 100,
	}
}

// leaderElectionJitter is client-go's: a candidate waits RetryPeriod plus up to 1.2 × RetryPeriod
// between two tries.
const leaderElectionJitter = 1.2

// GCPercent is the collector's pace the controller's main sets unless GOGC is set, exported as
// go_gc_gogc_percent. The controller's heap is mostly its caches, which change little once
// synced; at Go's default GOGC=100 the garbage of the first lists and the first reconcile pass
// sets its peak memory. 25 keeps the heap within a quarter of what is live: on a cluster of 2,000
// namespaces the peak went from 159 to 129 MiB, the collector's share of the first 100 s of CPU
// from 2% to 4% (docs/performance.md, "Fourth round").
const GCPercent = 25

// TakeoverBound is the longest a standby waits to take over from a leader that stopped without
// releasing the Lease (SIGKILL, node loss), API latency aside: its last sight of the leader's
// renewal may come one retry after the crash; it deems the Lease expired LeaseDuration after that
// sight and notices at its next retry.
func (o Options) TakeoverBound() time.Duration {
	maxRetry := time.Duration(float64(o.RetryPeriod) * (1 + leaderElectionJitter))
	return maxRetry + o.LeaseDuration + maxRetry
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
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress, `address of Go's /debug/pprof profiles, for measuring; unauthenticated, so keep it on loopback ("0" disables)`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve /metrics over HTTPS, only to callers the kube-apiserver authenticates and allows get on /metrics")
	fs.Int64Var(&o.CacheListPageSize, "cache-list-page-size", o.CacheListPageSize, "objects per page of the caches' lists, each page trimmed before the next is read (0: client-go's own list or watch-list stream)")
	fs.Var(flags.List{Items: &o.Controllers, Required: "lists no reconciler"}, "controllers", controllersUsage)
}

// controllersUsage is --controllers' help; DescribeReconcilers adds the reconcilers' names.
const controllersUsage = "comma-separated reconcilers to run, all when empty"

// DescribeReconcilers lists the names of the registered reconcilers (pkg/setup's registry) in the
// help of --controllers, when fs has it (BindFlags).
func DescribeReconcilers(fs *flag.FlagSet, names []string) {
	if f := fs.Lookup("controllers"); f != nil {
		f.Usage = controllersUsage + ": " + strings.Join(names, ", ")
	}
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
	if o.CacheListPageSize < 0 {
		return fmt.Errorf("--cache-list-page-size %d: want 0 (client-go's list) or more", o.CacheListPageSize)
	}
	if err := validateBindAddress(o.HealthProbeBindAddress); err != nil {
		return fmt.Errorf("--health-probe-bind-address: %w", err)
	}
	if err := validateBindAddress(o.MetricsBindAddress); err != nil {
		return fmt.Errorf("--metrics-bind-address: %w", err)
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
