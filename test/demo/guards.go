package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/drift"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// The guards' rows run with olmguard's default modes (warn): the row says what a user sees, and
// what enforce would do.

// olmguardWarning is the first of warnings that olmguard gave, shortened for the table.
func olmguardWarning(warnings string) string {
	for line := range strings.SplitSeq(warnings, "\n") {
		if msg, ok := strings.CutPrefix(line, "olmguard: "); ok {
			return msg
		}
	}
	return ""
}

// realApproval: a Manual Subscription with an upgrade pending meets a new Automatic one; OLM makes
// one Manual plan holding both, and approving it for the new operator upgrades the Manual one.
func (d *demo) realApproval(ctx context.Context, c *cluster.Cluster, mode string) (string, error) {
	done := d.step("approval: alpha (Manual, upgrade to 2.0.0 pending) and a new Automatic Subscription to beta; approving beta's plan")
	run, err := realolm.MixedApproval(ctx, c.Client, "demo-approval-"+mode, realolm.Beta)
	if err != nil {
		return "", err
	}
	cl, w, err := testenv.NewWarningClient(c.Config, c.Client.Scheme())
	if err != nil {
		return "", err
	}
	if err := realolm.Approve(ctx, cl, run.Mixed); err != nil {
		return "", err
	}
	warned := olmguardWarning(w.Take())
	upgraded := realolm.CSVSucceeded(ctx, c.Client, run.Namespace, realolm.Alpha.CSVName("2.0.0")) == nil
	done()
	then := "alpha left at 1.0.0"
	if upgraded {
		then = "Manual alpha upgraded to 2.0.0 unasked"
	}
	return d.guardOutcome(warned, "approved", "warned at the approval", then), nil
}

// realOperatorGroup: a second OperatorGroup beside an installed operator.
func (d *demo) realOperatorGroup(ctx context.Context, c *cluster.Cluster, mode string) (string, error) {
	done := d.step("OperatorGroups: installing beta, then creating a second OperatorGroup in its namespace")
	ns, err := realolm.OperatorNamespace(ctx, c.Client, "demo-og-"+mode)
	if err != nil {
		return "", err
	}
	csvName := realolm.Beta.CSVName("1.0.0")
	if err := c.Client.Create(ctx, realolm.NewSubscription(ns, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")); err != nil {
		return "", err
	}
	if err := realolm.CSVSucceeded(ctx, c.Client, ns, csvName); err != nil {
		return "", err
	}
	cl, w, err := testenv.NewWarningClient(c.Config, c.Client.Scheme())
	if err != nil {
		return "", err
	}
	second := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: ns}, Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{ns}}}
	if err := cl.Create(ctx, second); err != nil {
		return "", err
	}
	warned := olmguardWarning(w.Take())
	failed := realolm.CSVFailed(ctx, c.Client, ns, csvName, "TooManyOperatorGroups") == nil
	done()
	then := "beta's CSV still Succeeded"
	if failed {
		then = "OLM fails beta's CSV (TooManyOperatorGroups)"
	}
	res := d.guardOutcome(warned, "admitted", "warned at creation", then)
	return res, c.Client.Delete(ctx, second) // leave the namespace as OLM can use it again
}

// guardOutcome is a guard row's cell: how the write was answered (admitted, or warned about with
// olmguard's warning printed below), then what OLM did.
func (d *demo) guardOutcome(warning, admitted, warned, then string) string {
	res := admitted + ": " + then
	if warning != "" {
		res = warned + " (enforce denies it): " + then
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	if warning != "" {
		fmt.Fprintf(d.out, "    warning: %s\n", warning)
	}
	return res
}

// realOrphanCSV: deleting only an operator's Subscription leaves its CSV, and a new Subscription
// to the same package then fails to resolve (ConstraintsNotSatisfiable) without naming the CSV in
// its way. With olmguard, `kubectl olmguard doctor` names it and prints the fix, which the demo
// applies.
func (d *demo) realOrphanCSV(ctx context.Context, c *cluster.Cluster, bin, mode string) (string, error) {
	done := d.step("orphan CSV: installing beta, deleting only its Subscription, subscribing to beta again")
	ns, err := realolm.OperatorNamespace(ctx, c.Client, "demo-orphan-"+mode)
	if err != nil {
		return "", err
	}
	csvName := realolm.Beta.CSVName("1.0.0")
	first := realolm.NewSubscription(ns, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	if err := c.Client.Create(ctx, first); err != nil {
		return "", err
	}
	if err := realolm.CSVSucceeded(ctx, c.Client, ns, csvName); err != nil {
		return "", err
	}
	if err := c.Client.Delete(ctx, first); err != nil {
		return "", err
	}
	again := realolm.NewSubscription(ns, "beta-again", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	if err := c.Client.Create(ctx, again); err != nil {
		return "", err
	}
	if err := realolm.ResolutionFailed(ctx, c.Client, again, drift.ReasonConstraintsNotSatisfiable); err != nil {
		return "", err
	}
	done()
	if mode == "stock" {
		res := "new Subscription fails: ConstraintsNotSatisfiable, the CSV in its way unnamed"
		fmt.Fprintf(d.out, "    %s\n", res)
		return res, nil
	}
	done = d.step("kubectl olmguard doctor -n %s, then its fix", ns)
	f, err := doctorFinding(ctx, bin, c.Kubeconfig, "OrphanCSVBlocksResolution", "-n", ns)
	if err != nil {
		return "", err
	}
	printFinding(d.out, f)
	fixed := time.Now()
	orphan := &v1alpha1.ClusterServiceVersion{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: csvName}, orphan); err != nil {
		return "", err
	}
	if err := c.Client.Delete(ctx, orphan); err != nil {
		return "", err
	}
	if err := realolm.Gone(ctx, c.Client, orphan); err != nil {
		return "", err
	}
	if err := realolm.Resync(ctx, c.Client, again); err != nil {
		return "", err
	}
	if err := realolm.CSVSucceeded(ctx, c.Client, ns, csvName); err != nil {
		return "", err
	}
	done()
	res := fmt.Sprintf("doctor names %s and the fix; with it applied beta installs in %s", csvName, time.Since(fixed).Round(time.Second))
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}

// doctorFinding runs `kubectl olmguard doctor -o json` with args (such as -n NS) and returns its
// finding of check.
func doctorFinding(ctx context.Context, bin, kubeconfig, check string, args ...string) (doctor.Finding, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl-olmguard"), append([]string{"doctor", "--kubeconfig", kubeconfig, "-o", "json"}, args...)...)
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) { // exit 1: findings
		return doctor.Finding{}, fmt.Errorf("kubectl olmguard doctor: %w", err)
	}
	var report doctor.Report
	if err := json.Unmarshal(out, &report); err != nil {
		return doctor.Finding{}, fmt.Errorf("kubectl olmguard doctor -o json: %w: %s", err, out)
	}
	for _, f := range report.Findings {
		if f.Check == check {
			return f, nil
		}
	}
	return doctor.Finding{}, fmt.Errorf("kubectl olmguard doctor %s reported no %s: %+v", strings.Join(args, " "), check, report.Findings)
}

// tenantCatalog is the catalog a tenant serves in its namespace (OLM #3820), started once per demo.
type tenantCatalog struct{ address string }

func startTenantCatalog(o *cluster.OLM) (*tenantCatalog, error) {
	dir, images, err := realolm.WriteCatalog(filepath.Join(o.Dir(), "tenant-catalog"), realolm.Kappa)
	if err != nil {
		return nil, err
	}
	address, err := o.StartCatalogServer(realolm.TenantCatalog, dir, images)
	return &tenantCatalog{address: address}, err
}

// realCatalogTrust: a tenant who may write CatalogSources and Subscriptions in its own namespace,
// and nothing cluster-wide, serves its own catalog and subscribes to an operator whose CSV asks to
// read every Secret; OLM grants it (OLM #3820). With olmguard the guarded phase runs
// --policy-catalog-trust=enforce (off by default).
func (d *demo) realCatalogTrust(ctx context.Context, c *cluster.Cluster, o *cluster.OLM, tc *tenantCatalog, mode string) (string, error) {
	done := d.step("catalog trust: a tenant serves its own catalog in its namespace and subscribes to an operator that reads every Secret")
	ns, err := realolm.OperatorNamespace(ctx, c.Client, "demo-tenant-"+mode)
	if err != nil {
		return "", err
	}
	tenant, err := realolm.TenantClient(ctx, c, ns)
	if err != nil {
		return "", err
	}
	if err := tenant.Create(ctx, realolm.NewTenantCatalog(ns, tc.address)); err != nil {
		done()
		if !apierrors.IsForbidden(err) {
			return "", err
		}
		res := "tenant's CatalogSource denied (--policy-catalog-trust=enforce; off by default)"
		fmt.Fprintf(d.out, "    %s\n    %v\n", res, err)
		return res, nil
	}
	csvName := realolm.Kappa.CSVName("1.0.0")
	err = o.CatalogReady(ctx, ns, realolm.TenantCatalog)
	if err == nil {
		err = tenant.Create(ctx, realolm.NewTenantSubscription(ns, ns, realolm.Kappa))
	}
	if err == nil {
		err = realolm.CSVSucceeded(ctx, c.Client, ns, csvName)
	}
	if err != nil {
		return "", err
	}
	can, err := realolm.CanListSecretsIn(ctx, c, ns, realolm.Kappa.ServiceAccount(), "kube-system")
	done()
	if err != nil {
		return "", err
	}
	res := "tenant's operator installed, its ServiceAccount granted no Secrets"
	if can {
		res = "tenant's operator installed: OLM bound it a ClusterRole reading every Secret"
	}
	fmt.Fprintf(d.out, "    %s\n", res)
	return res, nil
}
