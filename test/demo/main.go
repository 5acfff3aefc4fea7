// Command demo shows olmguard at work on a local cluster: it replays OLM's failures with the OLM
// simulator, first on stock OLM, then with olmguard's webhook and controller running, and prints
// what happened. `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testbin"
)

func main() {
	replays := flag.Int("replays", 5, "how many times to replay OLM issue #3199 in each mode on the simulator")
	keep := flag.Bool("keep", false, "keep the cluster (and print its kubeconfig) when done")
	skipF5 := flag.Bool("skip-f5", false, "skip the catalog node failure (about a minute)")
	simOnly := flag.Bool("sim-only", false, "replay every failure on the OLM simulator, even where OLM's own binaries (../shared/olm) are at hand")
	flag.Parse()
	logf.SetLogger(logr.Discard())
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout, *replays, *keep, *skipF5, *simOnly)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// stopped runs stop at the end of a step and reports its failure, which ends nothing: the demo
// has printed its figures by then.
func stopped(what string, stop func() error) {
	if err := stop(); err != nil {
		fmt.Fprintf(os.Stderr, "demo: %s: %v\n", what, err)
	}
}

// row is one line of the final table: the failure, OLM's issue, which OLM produced it, and the
// outcome on stock OLM and with olmguard.
type row struct{ class, issue, olm, stock, guarded string }

type demo struct {
	out   io.Writer
	start time.Time
	rows  []row
	// hold holds the real-OLM cluster's catalog-operator between its two Subscription Lists of a
	// namespace sync, for the F1 replay that shows OLM #3199 every time.
	hold *realolm.ReadHold
}

func (d *demo) step(format string, args ...any) func() {
	t := time.Now()
	fmt.Fprintf(d.out, "==> %s\n", fmt.Sprintf(format, args...))
	return func() { fmt.Fprintf(d.out, "    done in %s\n", time.Since(t).Round(100*time.Millisecond)) }
}

func run(ctx context.Context, out io.Writer, replays int, keep, skipF5, simOnly bool) error {
	d := &demo{out: out, start: time.Now()}
	fmt.Fprintln(out, "olmguard demo: OLM v0's failures on a local cluster, first on stock OLM, then with olmguard.")
	real := !simOnly
	if err := realOLMAvailable(); err != nil && real {
		real = false
		fmt.Fprintf(out, "OLM's own binaries are not at hand (%v): every row comes from the simulator.\n", err)
	}
	if real {
		fmt.Fprintf(out, "F1, F3, F4, the guards and N1 to N4 (failures users reported in 2025-2026) run on OLM's own olm-operator\n")
		fmt.Fprintf(out, "and catalog-operator (%s; %s -> %s for F4);\n", realolm.Version, realolm.OLMBefore, realolm.OLMAfter)
		fmt.Fprintln(out, "F1 again, F2 and F5 on olmguard's OLM simulator (test/olmsim), which reproduces OLM v0.46's behaviour and bugs")
		fmt.Fprintln(out, "and replays F1 at the exact point of OLM's race.")
	} else {
		fmt.Fprintln(out, "OLM's writes come from olmguard's OLM simulator (test/olmsim), which reproduces OLM v0.46's behaviour and bugs.")
	}

	done := d.step("starting a local cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and 3 kwok nodes")
	c, err := cluster.Start(ctx, cluster.Options{Name: "olmguard-demo", Persistent: keep, Log: io.Discard})
	if err != nil {
		return err
	}
	if !keep {
		defer stopped("stopping the cluster", c.Stop)
	}
	done()

	done = d.step("building olmguard's webhook and controller")
	root, err := testbin.RepoRoot()
	if err != nil {
		return err
	}
	bin, err := os.MkdirTemp("", "olmguard-demo-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	if err := procs.Build(root, bin); err != nil {
		return err
	}
	done()

	sim, err := olmsim.Start(ctx, c.Config, c.Client.Scheme(), olmsim.Options{Namespace: "olm"})
	if err != nil {
		return err
	}
	f1cat := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, f1cat); err != nil {
		return err
	}
	go sim.RunCatalogOperator(ctx, 2*time.Second)

	fmt.Fprintln(out, "\n--- stock OLM (simulated), olmguard not installed ---")
	// F1 on the simulator in every case: it creates B at the exact point of OLM's race, which
	// real OLM's timing hits only now and then.
	f1Stock, err := d.f1(ctx, sim, f1cat, "stock", replays)
	if err != nil {
		return err
	}
	var f3, f4 string
	f2, err := d.f2(ctx, c, sim, f1cat, "stock")
	if err != nil {
		return err
	}
	if !real {
		if f3, err = d.f3(ctx, c, sim, "stock"); err != nil {
			return err
		}
		f4 = d.f4(ctx, sim, "stock")
	}
	f5 := "skipped (--skip-f5)"
	if !skipF5 {
		if f5, err = d.f5(ctx, c, sim, "stock"); err != nil {
			return err
		}
	}

	fmt.Fprintln(out, "\n--- OLM (simulated) with olmguard ---")
	done = d.step("starting olmguard's controller (--drift-window=%s)", demoDriftWindow)
	ctrl, err := procs.StartController(bin, c.Kubeconfig, "--drift-window="+demoDriftWindow.String())
	if err != nil {
		return err
	}
	defer ctrl.Stop()
	done()
	// F2 first, before the webhook: with the webhook, #3199 never happens and the Subscription is
	// told at once. The controller alone repairs the plan's owners (F1) and watches for drift.
	f2Guarded, err := d.f2(ctx, c, sim, f1cat, "guarded")
	if err != nil {
		return err
	}
	done = d.step("starting olmguard's webhook (self-signed certificate, registered with the cluster)")
	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		return err
	}
	wh, err := procs.StartWebhook(bin, c.Kubeconfig)
	if err != nil {
		return err
	}
	defer wh.Stop()
	defer stopped("removing the webhook configurations", func() error { return procs.RemoveWebhookConfigurations(context.Background(), c.Client) })
	time.Sleep(2 * time.Second) // the apiserver picks up new webhook configurations asynchronously
	done()
	f1Guarded, err := d.f1(ctx, sim, f1cat, "guarded", replays)
	if err != nil {
		return err
	}
	var f3Guarded, f4Guarded string
	if !real {
		if f3Guarded, err = d.f3(ctx, c, sim, "guarded"); err != nil {
			return err
		}
		f4Guarded = d.f4(ctx, sim, "guarded")
	}
	f5Guarded := "skipped (--skip-f5)"
	if !skipF5 {
		if f5Guarded, err = d.f5(ctx, c, sim, "guarded"); err != nil {
			return err
		}
	}

	const simulated = "simulated v0.46"
	f1Sim := row{"F1 InstallPlan misses a Subscription owner", "#3199", simulated, f1Stock, f1Guarded}
	rows := realRows{
		f3: row{"F3 objects left after uninstall", "#2985", simulated, f3, f3Guarded},
		f4: row{"F4 second install of a bundle stuck", "#3210", simulated, f4, f4Guarded},
	}
	if real {
		if rows, err = d.realOLM(ctx, bin); err != nil {
			return err
		}
	}
	d.rows = []row{}
	if real {
		f1Sim.class = "F1 ... replayed at OLM's race point"
		d.rows = append(d.rows, rows.f1)
	}
	d.rows = append(d.rows, []row{
		f1Sim,
		{"F2 Subscription status drifts from its plan", "#3199", simulated, f2, f2Guarded},
		rows.f3,
		rows.f4,
		{"F5 catalog pod stuck on NotReady node", "#3208", simulated, f5, f5Guarded},
	}...)
	if real {
		d.rows = append(d.rows, rows.approval, rows.operatorGroup, rows.orphan, rows.unpackRetry, rows.catalogTrust,
			rows.replacesCycle, rows.serviceAccount, rows.failedCatalogPod, rows.copiedCSVs)
	}
	fmt.Fprintf(out, "\nSummary (total %s):\n\n", time.Since(d.start).Round(time.Second))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "FAILURE\tOLM ISSUE\tOLM\tSTOCK OLM\tWITH OLMGUARD")
	for _, r := range d.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.class, r.issue, r.olm, r.stock, r.guarded)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if keep {
		fmt.Fprintf(out, "\nThe cluster is kept: export KUBECONFIG=%s (remove it with: make cluster-down CLUSTER=%s)\n", c.Kubeconfig, c.Name)
	}
	return nil
}

func (d *demo) f1(ctx context.Context, sim *olmsim.Sim, cat *olmsim.Catalog, mode string, n int) (string, error) {
	done := d.step("F1: replaying OLM issue #3199 %d times (a Manual Subscription, then an Automatic one created inside OLM's resolution)", n)
	owned := 0
	for i := range n {
		r, err := scenario.Replay3199(ctx, sim, cat, fmt.Sprintf("demo-f1-%s-%d", mode, i))
		if err != nil {
			return "", err
		}
		if r.Owned() {
			owned++
		}
	}
	done()
	res := fmt.Sprintf("%d/%d plans miss an owner", n-owned, n)
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

// demoDriftWindow is the controller's --drift-window in the demo (default 30s), to keep it short.
const demoDriftWindow = 10 * time.Second

func (d *demo) f2(ctx context.Context, c *cluster.Cluster, sim *olmsim.Sim, cat *olmsim.Catalog, mode string) (string, error) {
	const patience = 3 * demoDriftWindow
	done := d.step("F2: a plan completes, but the Subscription left out of its owners (#3199) is never told; waiting up to %s", patience)
	ns := "demo-f2-" + mode
	syncCtx, stop := context.WithCancel(ctx)
	defer stop()
	go sim.RunSubscriptionSyncer(syncCtx, ns)
	r, err := scenario.ReplayStaleSubscription(ctx, sim, cat, ns)
	if err != nil {
		return "", err
	}
	var took time.Duration
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, patience, true, func(ctx context.Context) (bool, error) {
		ok, err := scenario.InStep(ctx, c.Client, r.Auto)
		took = time.Since(r.Stale)
		return ok, err
	})
	done()
	res := fmt.Sprintf("still InstallPlanPending %s after the plan completed", patience)
	if err == nil {
		res = fmt.Sprintf("status corrected %s after the plan completed (drift window %s)", took.Round(time.Second), demoDriftWindow)
		if took < demoDriftWindow {
			// The owner repair (F1) came first: OLM told the Subscription, no drift to report.
			res = fmt.Sprintf("status in step after %s: olmguard made it an owner of the plan, so OLM told it", took.Round(100*time.Millisecond))
		}
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

func (d *demo) f3(ctx context.Context, c *cluster.Cluster, sim *olmsim.Sim, mode string) (string, error) {
	done := d.step("F3: installing an operator (cluster permissions, a bundled ClusterRole, a webhook), upgrading it once, uninstalling it")
	ns := "demo-f3-" + mode
	cat := scenario.GammaUpgradeCatalog(ns)
	sub, err := scenario.InstallGamma(ctx, sim, cat, ns)
	if err != nil {
		return "", err
	}
	if err := scenario.Uninstall(ctx, c.Client, sub); err != nil {
		return "", err
	}
	if err := sim.SyncCSVs(ctx, ns); err != nil { // OLM's own finalizer runs
		return "", err
	}
	// With olmguard the CSV goes once its cleanup is done.
	if err := waitGone(ctx, c, ns, cat.Bundles[len(cat.Bundles)-1].CSVName); err != nil {
		return "", err
	}
	l, err := scenario.CountLeftovers(ctx, c.Client, cat, ns)
	if err != nil {
		return "", err
	}
	done()
	res := fmt.Sprintf("%d objects left (bundled ClusterRole: %d, auth-reader RoleBinding: %d)", l.Total(), l.Bundled, l.AuthReader)
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

func waitGone(ctx context.Context, c *cluster.Cluster, ns, name string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.ClusterServiceVersion{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
}

// f4's outcome is its row: a replay that fails is the stock row's "stuck", not an error.
func (d *demo) f4(ctx context.Context, sim *olmsim.Sim, mode string) string {
	done := d.step("F4: a bundle unpacked by OLM v0.25, then, after an upgrade to v0.28, installed into a second namespace")
	err := scenario.Replay3210(ctx, sim.WithVersion(olmsim.V0_28), "demo-f4-"+mode+"-a", "demo-f4-"+mode+"-b")
	done()
	res := "second install succeeded"
	if err != nil {
		res = "second install stuck"
		if strings.Contains(err.Error(), "already exists") {
			res += ": Job already exists"
		}
		fmt.Fprintf(d.out, "    %s\n", err)
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	return res
}

func (d *demo) f5(ctx context.Context, c *cluster.Cluster, sim *olmsim.Sim, mode string) (string, error) {
	const wait = 45 * time.Second
	done := d.step("F5: stopping the heartbeats of the node that runs a catalog pod, then waiting up to %s from NotReady", wait)
	cat := &olmsim.Catalog{Name: "demo-f5-" + mode}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		return "", err
	}
	o, err := scenario.FailCatalogNode(ctx, c, cat, wait)
	if err != nil {
		return "", err
	}
	done()
	res := fmt.Sprintf("no catalog pod %s after NotReady", wait)
	if o.Recovered {
		res = fmt.Sprintf("catalog pod back %s after NotReady", o.Recovery.Round(time.Second))
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	if o.Recovered {
		fmt.Fprintf(d.out, "    (%s after the node's heartbeats stopped)\n", o.Total().Round(time.Second))
	}
	return res, nil
}
