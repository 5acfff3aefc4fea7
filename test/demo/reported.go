package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
)

// The rows of failures users reported in 2025-2026 (olm-facts §8): a spec.replaces cycle (N1),
// a ServiceAccount's metadata lost at an upgrade (N2) and OLM's copied CSVs (N4), each replayed on
// OLM's own binaries with the scenarios the real-OLM tier asserts (test/realolm).

// realServiceAccount: alpha 1.0.0 installed with Manual approval, its ServiceAccount given what a
// user gives it (EKS IRSA's role annotation, a label, an image pull secret), then the upgrade to
// 2.0.0 approved: its plan's ServiceAccount step rewrites the ServiceAccount (OLM #3607).
func (d *demo) realServiceAccount(ctx context.Context, c *cluster.Cluster, mode string) (string, error) {
	done := d.step("ServiceAccount: alpha 1.0.0 installed (Manual); its ServiceAccount given an %s annotation (EKS IRSA), a label and an imagePullSecret; the upgrade to 2.0.0 approved", realolm.SARoleAnnotation)
	k, err := realolm.UpgradeWithUserMetadata(ctx, c.Client, "demo-sa-"+mode, mode == "stock", func(string, ...any) {})
	done()
	if err != nil {
		return "", err
	}
	res := saOutcome(k)
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

// demoN3Window is how long the demo watches stock OLM keep a Failed registry pod.
const demoN3Window = 20 * time.Second

// realFailedCatalogPod runs an image-backed catalog, evicts its registry pod on a Ready node as the
// kubelet does under memory pressure (phase Failed, reason Evicted, no DisruptionTarget), and says
// what OLM then does: stock OLM keeps the dead pod and runs no other (#3459, #3519); with
// olmguard's controller the pod is deleted and OLM runs a new one.
func (d *demo) realFailedCatalogPod(ctx context.Context, c *cluster.Cluster, o *cluster.OLM, mode string) (string, error) {
	done := d.step("Failed catalog pod: an image-backed catalog's registry pod evicted by its kubelet on a Ready node (phase Failed, no DisruptionTarget)")
	cs := realolm.NewRegistryCatalog(o.CatalogNamespace, "demo-n3-"+mode)
	if err := c.Client.Create(ctx, cs); err != nil {
		return "", err
	}
	defer func() { _ = c.Client.Delete(context.Background(), cs) }()
	dead, err := realolm.SettleAndEvict(ctx, c.Client, cs)
	if err != nil {
		return "", err
	}
	evicted := time.Now()
	var res string
	if mode == "stock" {
		if err := realolm.FailedPodKept(ctx, c.Client, cs, dead, demoN3Window); err != nil {
			res = "not reproduced: " + err.Error()
		} else {
			res = fmt.Sprintf("OLM keeps the Failed pod as its registry server, no other in %s: the catalog serves nothing", demoN3Window)
		}
	} else {
		after, err := realolm.FailedPodReplaced(ctx, c.Client, cs, dead)
		if err != nil {
			return "", err
		}
		res = fmt.Sprintf("Failed pod deleted; OLM ran a new one %s after the eviction", time.Since(evicted).Round(100*time.Millisecond))
		fmt.Fprintf(d.out, "    OLM's new registry pod: %s on %s\n", after.Name, after.Spec.NodeName)
	}
	done()
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

// saOutcome is the row's cell for what of the user's metadata the upgrade kept.
func saOutcome(k realolm.SAKept) string {
	if !k.Upgraded {
		return "upgrade never came (OLM's stale resolution race): nothing to compare"
	}
	var kept, dropped []string
	for _, m := range []struct {
		name string
		kept bool
	}{{"IRSA role annotation", k.Annotation}, {"label", k.Label}, {"imagePullSecret", k.PullSecret}} {
		if m.kept {
			kept = append(kept, m.name)
		} else {
			dropped = append(dropped, m.name)
		}
	}
	if len(dropped) == 0 {
		return "upgraded to 2.0.0: IRSA role annotation, label and imagePullSecret kept"
	}
	res := "upgrade to 2.0.0 dropped the " + strings.Join(dropped, " and the ")
	if len(kept) > 0 {
		res += "; kept the " + strings.Join(kept, " and the ")
	}
	return res
}

// cycleCSV is the self-replacing CSV of the replaces-cycle row.
const cycleCSV = "cycle.v1.0.0"

// realReplacesCycle replays OCPBUGS-23954 on a cluster of its own whose olm-operator reports
// ClusterOperator status (as on OpenShift): a CSV whose spec.replaces names itself sends it into a
// loop that deleting the CSV does not end; OLM is stopped once that is shown (the loop spins a
// core). Then olmguard in its default modes: the same CSV is warned about at creation, and
// `kubectl olmguard doctor` reports it.
func (d *demo) realReplacesCycle(ctx context.Context, bin string) (stock, guarded string, err error) {
	done := d.step("replaces cycle: a fifth cluster with OLM %s reporting ClusterOperator status (--writePackageServerStatusName, as on OpenShift); a CSV whose spec.replaces names itself, then deleted", realolm.Version)
	c, err := cluster.Start(ctx, cluster.Options{Name: "olmguard-demo-cycle", Nodes: 1, Log: io.Discard})
	if err != nil {
		return "", "", err
	}
	defer stopped("stopping the replaces-cycle cluster", c.Stop)
	o, err := c.StartOLMWith(ctx, realolm.Version, realolm.ReplacesCycleOLM())
	if err != nil {
		return "", "", err
	}
	defer o.Stop()
	ns, err := realolm.OperatorNamespace(ctx, c.Client, "demo-cycle-stock")
	if err != nil {
		return "", "", err
	}
	loop, err := realolm.ReplacesLoopOnStock(ctx, c.Client, o, ns, cycleCSV)
	o.Stop() // the loop spins a core until olm-operator stops
	done()
	if err != nil {
		if ctx.Err() != nil {
			return "", "", ctx.Err()
		}
		stock = "no loop seen: " + err.Error()
	} else {
		stock = fmt.Sprintf("olm-operator loops: %d log lines \"<csv> replaced by <csv>\"; deleting the CSV does not end it", loop.AfterDelete)
		fmt.Fprintf(d.out, "    olm-operator logged %d such lines %s after the CSV's creation, %d at its deletion, %d after (the CSV: %s):\n      %s\n",
			loop.First, loop.Took.Round(100*time.Millisecond), loop.AtDelete, loop.AfterDelete, loop.CSVAfterDelete, printable.Line(loop.Sample))
	}
	fmt.Fprintf(d.out, "    stock: %s (OLM stopped)\n", stock)

	done = d.step("replaces cycle: olmguard (default modes) on that cluster; the same CSV created in another namespace (OLM stays stopped: warn admits it), then kubectl olmguard doctor")
	stop, err := runOlmguard(ctx, bin, c, nil, nil)
	if err != nil {
		return "", "", err
	}
	defer stop()
	ns, err = realolm.OperatorNamespace(ctx, c.Client, "demo-cycle-guarded")
	if err != nil {
		return "", "", err
	}
	adm, err := realolm.CreateSelfReplacing(ctx, c.Config, c.Client.Scheme(), ns, cycleCSV)
	if err != nil {
		return "", "", err
	}
	if adm.Err != nil {
		done()
		guarded = "denied at creation: " + adm.Err.Error()
		fmt.Fprintf(d.out, "    %s\n", guarded)
		return stock, guarded, nil
	}
	f, err := doctorFinding(ctx, bin, c.Kubeconfig, "ReplacesCycle", "-n", ns)
	done()
	if err != nil {
		return "", "", err
	}
	guarded = d.guardOutcome(olmguardWarning(adm.Warnings), "admitted", "warned at creation", "doctor reports ReplacesCycle and the way out")
	printFinding(d.out, f)
	return stock, guarded, nil
}

// demoCopiedCSVsAbove is doctor's --copied-csvs-above in the demo (default
// doctor.DefaultCopiedCSVsAbove): the demo's cluster has a few dozen namespaces.
const demoCopiedCSVsAbove = 10

// realCopiedCSVs replays OCPBUGS-37982 / OLM #2701 on c once olmguard is stopped: an operator
// installed for all namespaces is copied by OLM into every other namespace, and nothing says so.
// Then `kubectl olmguard doctor` reports it with OLMConfig's switch, which the demo applies.
func (d *demo) realCopiedCSVs(ctx context.Context, c *cluster.Cluster, o *cluster.OLM, bin string) (stock, guarded string, err error) {
	done := d.step("copied CSVs: olmguard stopped; %s installed for all namespaces (an AllNamespaces OperatorGroup, as most OpenShift users install operators)", realolm.Omega.Name)
	r, err := realolm.InstallEverywhere(ctx, c.Client, o, realolm.Omega)
	done()
	switch {
	case err != nil && r.Copies == 0:
		return "", "", err
	case err != nil:
		fmt.Fprintf(d.out, "    %v\n", err)
	}
	stock = fmt.Sprintf("%d copies of %s, one in each of %d other namespaces; nothing reports them", r.Copies, r.CSV, r.Elsewhere)
	fmt.Fprintf(d.out, "    stock: %s\n", stock)

	done = d.step("copied CSVs: kubectl olmguard doctor --copied-csvs-above=%d (default %d), then its fix", demoCopiedCSVsAbove, doctor.DefaultCopiedCSVsAbove)
	f, err := doctorFinding(ctx, bin, c.Kubeconfig, "CopiedCSVsMultiply", "-A", fmt.Sprintf("--copied-csvs-above=%d", demoCopiedCSVsAbove))
	if err != nil {
		return "", "", err
	}
	printFinding(d.out, f)
	fixed := time.Now()
	if err := realolm.DisableCopiedCSVs(ctx, c.Client); err != nil {
		return "", "", err
	}
	err = realolm.NoCopiesOf(ctx, c.Client, r.Namespace, r.CSV)
	done()
	if err != nil {
		return "", "", err
	}
	guarded = fmt.Sprintf("doctor reports CopiedCSVsMultiply and OLMConfig's disableCopiedCSVs; with it applied OLM deleted the %d copies in %s",
		r.Copies, time.Since(fixed).Round(100*time.Millisecond))
	fmt.Fprintf(d.out, "    %s\n", guarded)
	return stock, guarded, nil
}

// printFinding prints doctor's finding: the problem, the fix and its commands.
func printFinding(out io.Writer, f doctor.Finding) {
	fmt.Fprintf(out, "    doctor: %s\n    fix: %s\n", printable.Line(f.Problem), printable.Line(f.Fix))
	for _, c := range f.Commands {
		fmt.Fprintf(out, "      %s\n", printable.Line(c))
	}
}
