package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
)

// realRows are the rows replayed on OLM's own binaries.
type realRows struct {
	f1, f3, f4, approval, operatorGroup, orphan, unpackRetry, catalogTrust row
	// The failures users reported in 2025-2026 (olm-facts §8).
	replacesCycle, serviceAccount, failedCatalogPod, copiedCSVs row
}

// realOLMAvailable says why the real-OLM rows cannot run, or nil: they need OLM's binaries and
// CRDs from ../shared (see ../shared/olm/README).
func realOLMAvailable() error {
	for _, v := range []string{realolm.Version, realolm.OLMBefore, realolm.OLMAfter} {
		if _, err := cluster.OLMBinaries(v); err != nil {
			return err
		}
	}
	return realolm.UseOLMCRDs()
}

// runOlmguard starts olmguard's webhook (with webhookFlags) and controller (with controllerFlags)
// against c; stop undoes it.
func runOlmguard(ctx context.Context, bin string, c *cluster.Cluster, webhookFlags, controllerFlags []string) (stop func(), err error) {
	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		return nil, err
	}
	wh, err := procs.StartWebhook(bin, c.Kubeconfig, webhookFlags...)
	if err != nil {
		return nil, err
	}
	ctrl, err := procs.StartController(bin, c.Kubeconfig, controllerFlags...)
	if err != nil {
		wh.Stop()
		return nil, err
	}
	time.Sleep(2 * time.Second) // the apiserver picks up new webhook configurations asynchronously
	return func() {
		ctrl.Stop()
		wh.Stop()
		_ = procs.RemoveWebhookConfigurations(context.Background(), c.Client)
	}, nil
}

// realOLM replays F1 and F3 on OLM realolm.Version and F4 across the OLM upgrade realolm.OLMBefore
// -> realolm.OLMAfter, each on stock OLM and then with olmguard, on clusters of their own; and the
// failures users reported in 2025-2026: the ServiceAccount and the copied CSVs on the first
// cluster, the replaces cycle on one of its own.
func (d *demo) realOLM(ctx context.Context, bin string) (realRows, error) {
	var rows realRows
	done := d.step("starting a second local cluster with OLM %s (its own olm-operator and catalog-operator)", realolm.Version)
	c, err := cluster.Start(ctx, cluster.Options{Name: "olmguard-demo-realolm", Log: io.Discard})
	if err != nil {
		return rows, err
	}
	defer stopped("stopping the real-OLM cluster", c.Stop)
	// catalog-operator reaches the apiserver through a ReadHold: transparent until F1's held
	// replay arms it.
	o, hold, err := realolm.StartHeldOLM(ctx, c, realolm.Version, realolm.Alpha, realolm.Beta, realolm.Gamma, realolm.Delta, realolm.Omega)
	if err != nil {
		return rows, err
	}
	defer hold.Close()
	d.hold = hold
	tc, err := startTenantCatalog(o)
	if err != nil {
		return rows, err
	}
	done()

	fmt.Fprintf(d.out, "\n--- stock OLM %s ---\n", realolm.Version)
	stock, err := d.realReplays(ctx, c, o, tc, bin, "stock", realolm.Gamma)
	if err != nil {
		return rows, err
	}
	fmt.Fprintf(d.out, "\n--- OLM %s with olmguard ---\n", realolm.Version)
	done = d.step("starting olmguard's webhook (default modes, but --policy-catalog-trust=enforce) and controller")
	stop, err := runOlmguard(ctx, bin, c, []string{"--policy-catalog-trust=enforce"}, nil)
	if err != nil {
		return rows, err
	}
	defer stop()
	done()
	guarded, err := d.realReplays(ctx, c, o, tc, bin, "guarded", realolm.Delta)
	if err != nil {
		return rows, err
	}
	// The copied CSVs are OLM's alone: olmguard's answer is doctor's. The apiserver drops removed
	// webhook configurations asynchronously.
	stop()
	time.Sleep(2 * time.Second)
	copiedStock, copiedGuarded, err := d.realCopiedCSVs(ctx, c, o, bin)
	if err != nil {
		return rows, err
	}
	f4Stock, f4Guarded, err := d.realF4(ctx, bin)
	if err != nil {
		return rows, err
	}
	retryStock, retryGuarded, err := d.realUnpackRetry(ctx, bin)
	if err != nil {
		return rows, err
	}
	cycleStock, cycleGuarded, err := d.realReplacesCycle(ctx, bin)
	if err != nil {
		return rows, err
	}
	real := "OLM " + realolm.Version
	rows.f1 = row{"F1 InstallPlan misses a Subscription owner", "#3199", real, stock.f1, guarded.f1}
	rows.f3 = row{"F3 objects left after uninstall", "#2985", real, stock.f3, guarded.f3}
	rows.f4 = row{"F4 second install of a bundle stuck", "#3210", "OLM " + realolm.OLMBefore + " -> " + realolm.OLMAfter, f4Stock, f4Guarded}
	rows.approval = row{"approving one plan upgrades a Manual operator", "#1859", real, stock.approval, guarded.approval}
	rows.operatorGroup = row{"a second OperatorGroup stops installs", "#669", real, stock.operatorGroup, guarded.operatorGroup}
	rows.unpackRetry = row{"failed bundle unpack never retried", "#2265", "OLM " + realolm.OLMAfter, retryStock, retryGuarded}
	rows.catalogTrust = row{"a tenant's catalog gets cluster-wide rights", "#3820", real, stock.catalogTrust, guarded.catalogTrust}
	rows.orphan = row{"an orphan CSV blocks resolution", "#2201", real, stock.orphan, guarded.orphan}
	rows.replacesCycle = row{"N1 a CSV replacing itself loops olm-operator", "OCPBUGS-23954", real + " (ClusterOperator status on)", cycleStock, cycleGuarded}
	rows.serviceAccount = row{"N2 an upgrade drops a ServiceAccount's metadata", "#3607", real, stock.serviceAccount, guarded.serviceAccount}
	rows.failedCatalogPod = row{"N3 a Failed catalog pod is never replaced", "#3459, #3519", real, stock.failedCatalogPod, guarded.failedCatalogPod}
	rows.copiedCSVs = row{"N4 copied CSVs multiply with namespaces", "OCPBUGS-37982", real, copiedStock, copiedGuarded}
	return rows, nil
}

// realOutcomes are the outcomes, in one mode, of the replays on the shared real-OLM cluster.
type realOutcomes struct {
	f1, f3, approval, operatorGroup, orphan, catalogTrust, serviceAccount, failedCatalogPod string
}

// realReplays replays, in mode, F1, F3 (installing and uninstalling f3), the approval, the second
// OperatorGroup, the orphan CSV, the tenant's catalog and the ServiceAccount's upgrade on c.
func (d *demo) realReplays(ctx context.Context, c *cluster.Cluster, olm *cluster.OLM, tc *tenantCatalog, bin, mode string, f3 realolm.Package) (o realOutcomes, err error) {
	if o.f1, err = d.realF1(ctx, c, mode, realF1Namespaces); err != nil {
		return o, err
	}
	if o.f3, err = d.realF3(ctx, c, f3, mode); err != nil {
		return o, err
	}
	if o.approval, err = d.realApproval(ctx, c, mode); err != nil {
		return o, err
	}
	if o.operatorGroup, err = d.realOperatorGroup(ctx, c, mode); err != nil {
		return o, err
	}
	if o.orphan, err = d.realOrphanCSV(ctx, c, bin, mode); err != nil {
		return o, err
	}
	if o.catalogTrust, err = d.realCatalogTrust(ctx, c, olm, tc, mode); err != nil {
		return o, err
	}
	if o.serviceAccount, err = d.realServiceAccount(ctx, c, mode); err != nil {
		return o, err
	}
	o.failedCatalogPod, err = d.realFailedCatalogPod(ctx, c, olm, mode)
	return o, err
}

// realF1Namespaces is how many namespaces each interleaving of #3199 uses on real OLM, which
// resolves namespaces one after another (about ten seconds each).
const realF1Namespaces = 3

// realF1InTurn is how many namespaces, one after another, the demo gives the interleaving that
// shows #3199 on stock OLM: enough that its row shows the rate (5 of 8 measured on v0.46.0).
const realF1InTurn = 12

// realF1 replays both interleavings of OLM #3199 in n fresh namespaces each, and the held one
// (realolm.HeldSecond: B created while OLM's sync is held between its two Subscription Lists, which
// stock OLM gets wrong every time) in n more, reported apart.
func (d *demo) realF1(ctx context.Context, c *cluster.Cluster, mode string, n int) (string, error) {
	done := d.step("F1: two Subscriptions created moments apart: A settled then B, in %d namespaces one after another as a user installs "+
		"(the order in which stock OLM misses B most often); A Manual approved then B Automatic, in %d namespaces side by side; "+
		"and B created while OLM's namespace sync is held between its two Subscription Lists, in %d namespaces", realF1InTurn, n, n)
	missing, total := 0, 0
	for i, round := range []struct {
		run realolm.F1Round
		n   int
	}{{realolm.SettledThenSecondInTurn, realF1InTurn}, {realolm.ManualThenAutomatic, n}} {
		results, err := round.run(ctx, c.Client, fmt.Sprintf("demo-f1-%s-%d", mode, i), round.n)
		if err != nil {
			return "", err
		}
		missing += len(realolm.Missing(results))
		total += len(results)
	}
	held, err := realolm.HeldSecond(d.hold)(ctx, c.Client, fmt.Sprintf("demo-f1-%s-held", mode), n)
	if err != nil {
		return "", err
	}
	done()
	res := fmt.Sprintf("%d/%d plans miss an owner with OLM's sync held, %d/%d unheld", len(realolm.Missing(held)), len(held), missing, total)
	if missing == 0 && mode == "stock" {
		res += " (OLM's race not hit this run)"
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

// realF3 installs pkg, creates an operand and uninstalls the operator as a user does.
func (d *demo) realF3(ctx context.Context, c *cluster.Cluster, pkg realolm.Package, mode string) (string, error) {
	done := d.step("F3: installing %s (it ships a ClusterRole in its bundle), creating an operand, uninstalling it", pkg.Name)
	u, err := realolm.Uninstall(ctx, c.Client, pkg, "demo-f3-"+mode)
	if err != nil {
		return "", err
	}
	done()
	res := "bundled ClusterRole deleted"
	if u.RoleLeft {
		res = "bundled ClusterRole left"
		if !u.RoleLabelled {
			res += " (OLM never labelled it olm.owner, #2985: see docs/cleanup.md, A bundled ClusterRole OLM applied once)"
		}
	}
	if u.OperandLeft {
		res += ", operand kept"
	} else {
		res += ", operand deleted"
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	if u.RoleCreatedAgain {
		fmt.Fprintf(d.out, "    (a plan step OLM still ran after the uninstall created the ClusterRole again, labelled olm.managed alone: deleted, as docs/cleanup.md says)\n")
	}
	return res, nil
}

// stockStuckFor is how long the stock F4 install is watched after OLM logged its failure.
const stockStuckFor = 20 * time.Second

// realF4 replays OLM #3210 as it happens in the field: OLM v0.25 installs an operator, OLM is
// upgraded to v0.28, a second install of the same bundle fails on the Job v0.25 left; then
// olmguard starts and the stuck install goes through.
func (d *demo) realF4(ctx context.Context, bin string) (stock, guarded string, err error) {
	done := d.step("F4: a third cluster: OLM %s installs an operator; OLM is upgraded to %s; the same operator is installed into a second namespace", realolm.OLMBefore, realolm.OLMAfter)
	u, err := realolm.StartUpgradeCluster(ctx, "olmguard-demo-f4", io.Discard)
	if err != nil {
		return "", "", err
	}
	defer stopped("stopping the upgrade cluster", u.C.Stop)
	csv := realolm.Zeta.CSVName(realolm.Zeta.Versions[0])
	first, err := u.InstallZeta(ctx, "demo-f4-first")
	if err == nil {
		err = realolm.CSVSucceeded(ctx, u.C.Client, first, csv)
	}
	if err == nil {
		err = u.UpgradeOLM(ctx)
	}
	var second string
	if err == nil {
		second, err = u.InstallZeta(ctx, "demo-f4-second")
	}
	if err != nil {
		return "", "", err
	}
	failure := fmt.Sprintf("jobs.batch %q already exists", olm.UnpackName(realolm.Zeta.Image(realolm.Zeta.Versions[0])))
	logged := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(context.Context) (bool, error) {
		logs, err := u.OLM.Logs()
		return strings.Contains(logs, failure), err
	})
	installed := wait.PollUntilContextTimeout(ctx, time.Second, stockStuckFor, true, func(ctx context.Context) (bool, error) {
		return succeeded(ctx, u.C.Client, second, csv), nil
	})
	done()
	switch {
	case installed == nil:
		stock = "second install succeeded"
	case logged == nil:
		stock = fmt.Sprintf("second install stuck (%s), no retry in %s", "Job already exists", stockStuckFor)
	default:
		stock = fmt.Sprintf("second install stuck %s", stockStuckFor)
	}
	fmt.Fprintf(d.out, "    stock: %s\n", stock)

	done = d.step("F4: starting olmguard on that cluster")
	stop, err := runOlmguard(ctx, bin, u.C, nil, nil)
	if err != nil {
		return "", "", err
	}
	defer stop()
	guarded, err = d.awaitInstall(ctx, u.C.Client, second, csv, done, "stuck install succeeded %s after olmguard started")
	return stock, guarded, err
}

// awaitInstall waits for CSV ns/csv to succeed after olmguard started (now), ends the step, and
// prints and returns format filled with how long that took, or "still stuck" and why.
func (d *demo) awaitInstall(ctx context.Context, c client.Client, ns, csv string, done func(), format string) (string, error) {
	started := time.Now()
	err := realolm.CSVSucceeded(ctx, c, ns, csv)
	done()
	res := fmt.Sprintf(format, time.Since(started).Round(time.Second))
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		res = "still stuck: " + err.Error()
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

// succeeded reports whether CSV name in ns is Succeeded now.
func succeeded(ctx context.Context, c client.Client, ns, name string) bool {
	csv := &v1alpha1.ClusterServiceVersion{}
	return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, csv) == nil && csv.Status.Phase == v1alpha1.CSVPhaseSucceeded
}

// realUnpackRetry replays OLM #2265 on a cluster of its own with OLM v0.28: an unpack Job failed
// (DeadlineExceeded) and, its cause gone, OLM never retries; then olmguard's controller starts with
// --unpack-retry-failed (off by default).
func (d *demo) realUnpackRetry(ctx context.Context, bin string) (stock, guarded string, err error) {
	done := d.step("unpack retry: a fourth cluster with OLM %s; a bundle unpack Job fails (DeadlineExceeded), then its cause goes away", realolm.OLMAfter)
	u, err := realolm.StartUnpackFailure(ctx, "olmguard-demo-unpack", io.Discard)
	if err != nil {
		return "", "", err
	}
	defer stopped("stopping the upgrade cluster", u.C.Stop)
	err = u.StillStuck(ctx, stockStuckFor)
	done()
	if err != nil {
		return "", "", err
	}
	stock = fmt.Sprintf("unpack Job Failed (DeadlineExceeded); cause gone, no retry in %s", stockStuckFor)
	fmt.Fprintf(d.out, "    stock: %s\n", stock)

	done = d.step("unpack retry: starting olmguard with --unpack-retry-failed --unpack-retry-failed-after=30s")
	stop, err := runOlmguard(ctx, bin, u.C, nil, []string{"--unpack-retry-failed", "--unpack-retry-failed-after=30s"})
	if err != nil {
		return "", "", err
	}
	defer stop()
	guarded, err = d.awaitInstall(ctx, u.C.Client, u.Namespace, u.CSV(), done, "failed Job removed, OLM retried: installed %s after olmguard started (opt-in)")
	return stock, guarded, err
}
