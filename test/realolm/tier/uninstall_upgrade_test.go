package tier

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// Eta and Theta are uninstalled during their upgrade, Eta on stock OLM and Theta with olmguard, so
// that what one leaves behind cannot be mistaken for the other's.
var (
	Eta   = realolm.Package{Name: "eta", Versions: []string{"1.0.0", "2.0.0"}}
	Theta = realolm.Package{Name: "theta", Versions: []string{"1.0.0", "2.0.0"}}
)

// uninstallUpgradeNamespaces is how many namespaces each round uses; whether OLM recreates a CSV
// is a race, so the count is reported, not asserted.
const uninstallUpgradeNamespaces = 4

// uninstallResult is one namespace of a round: the CSVs the uninstall deleted, and those left
// once no plan of the namespace was Installing any more.
type uninstallResult struct {
	ns      string
	deleted []string
	left    []string
	err     error
}

// uninstallDuringUpgrade subscribes to pkg v1 with Automatic approval in n fresh namespaces side by
// side; the moment OLM's plan for v2 is Installing, it uninstalls as a user does (the Subscription,
// then every CSV), waits until the namespace's plans are garbage-collected with their Subscription
// and returns the CSVs left in each namespace.
func uninstallDuringUpgrade(t *testing.T, c *cluster.Cluster, pkg realolm.Package, prefix string, n int) []uninstallResult {
	t.Helper()
	results := make([]uninstallResult, n)
	subs := make([]*v1alpha1.Subscription, n)
	for i := range results {
		results[i].ns = operatorNamespace(t, c, prefix)
		subs[i] = subscribe(t, c, results[i].ns, pkg.Name, pkg, v1alpha1.ApprovalAutomatic, pkg.CSVName(pkg.Versions[0]))
	}
	upgrade := pkg.CSVName(pkg.Versions[1])
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(r *uninstallResult, sub *v1alpha1.Subscription) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			r.err = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
				plans := &v1alpha1.InstallPlanList{}
				if err := c.Client.List(ctx, plans, client.InNamespace(r.ns)); err != nil {
					return false, err
				}
				for _, p := range plans.Items {
					if slices.Contains(p.Spec.ClusterServiceVersionNames, upgrade) && p.Status.Phase == v1alpha1.InstallPlanPhaseInstalling {
						return true, nil
					}
				}
				return false, nil
			})
			if r.err != nil {
				r.err = fmt.Errorf("no Installing plan for %s: %w", upgrade, r.err)
				return
			}
			if r.err = c.Client.Delete(context.Background(), sub); r.err != nil {
				return
			}
			var csvs []v1alpha1.ClusterServiceVersion
			if csvs, r.err = realolm.OwnCSVs(context.Background(), c.Client, r.ns); r.err != nil {
				return
			}
			for i := range csvs {
				r.deleted = append(r.deleted, csvs[i].Name)
				if r.err = c.Client.Delete(context.Background(), &csvs[i]); client.IgnoreNotFound(r.err) != nil {
					return
				}
			}
			r.err = nil
		}(&results[i], subs[i])
	}
	wg.Wait()
	// The plans go with their Subscription (garbage collection); what a plan created until then
	// is what the uninstall left. The catalog-operator may still finish a sync it began from its
	// cache a moment later: the cleanup below deletes such late CSVs too.
	for i := range results {
		waitPlansGone(t, c.Client, results[i].ns)
	}
	for i := range results {
		r := &results[i]
		if r.err != nil {
			t.Fatalf("namespace %s: %v", r.ns, r.err)
		}
		csvs, err := realolm.OwnCSVs(context.Background(), c.Client, r.ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, csv := range csvs {
			if csv.DeletionTimestamp == nil {
				r.left = append(r.left, csv.Name)
			}
		}
	}
	return results
}

// orphans lists the namespaces where a CSV was left after the uninstall, saying whether it was
// one the uninstall deleted (recreated) or one created after it.
func orphans(results []uninstallResult) []string {
	var out []string
	for _, r := range results {
		for _, name := range r.left {
			how := "created after the uninstall"
			if slices.Contains(r.deleted, name) {
				how = "recreated"
			}
			out = append(out, fmt.Sprintf("%s/%s (%s; deleted %s)", r.ns, name, how, strings.Join(r.deleted, ",")))
		}
	}
	return out
}

// TestF3UninstallDuringUpgrade: uninstalling (Subscription, then CSVs) while OLM's upgrade plan is
// Installing can leave a CSV that OLM recreates with no Subscription. Stock and with olmguard, the
// count is reported. The cause: an InstallPlan, once Installing, is executed to the end by the
// catalog-operator whether or not its Subscription still exists, and a CSV has no owner that
// would take it away. Every CSV left must be reported by doctor as CSVWithoutSubscription; with
// olmguard, removing it as doctor says leaves neither the CSV nor its bundled ClusterRole, even
// one a plan labelled for a CSV that is gone (olmguard's orphan sweep); a role a late step creates
// afresh names no operator and is reported (docs/cleanup.md).
func TestF3UninstallDuringUpgrade(t *testing.T) {
	declare(t, "F3: uninstall during an upgrade", false)
	c, o := realOLM(t)
	stock := uninstallDuringUpgrade(t, c, Eta, "uninstall-upgrade-stock", uninstallUpgradeNamespaces)
	t.Logf("stock OLM %s: a CSV came back in %d of %d namespaces %v", o.Version, len(orphans(stock)), len(stock), orphans(stock))
	checkOrphansReported(t, c, stock)

	// A short sweep interval: the orphaned bundled RBAC goes within seconds, not minutes.
	runOlmguard(t, c, "--orphan-rbac-sweep-interval=2s")
	guarded := uninstallDuringUpgrade(t, c, Theta, "uninstall-upgrade-olmguard", uninstallUpgradeNamespaces)
	t.Logf("with olmguard: a CSV came back in %d of %d namespaces %v", len(orphans(guarded)), len(guarded), orphans(guarded))
	checkOrphansReported(t, c, guarded)

	// Remove what came back, as doctor's fix says, and any CSV a plan's last sync creates later:
	// the catalog-operator may still execute a plan from its cache after the plan is gone from
	// the apiserver, so a Theta CSV can appear after a moment when none was left. The bundled
	// ClusterRole, whose CSV then exists nowhere, goes once no Theta CSV is left (olmguard's
	// sweep, two passes 2 s apart), whether the last CSV's cleanup removed it or a plan updated it
	// after that; until then, late CSVs are deleted as they come. A plan step that creates the role
	// afresh labels it olm.managed only (olm-facts §3.1: olm.owner is set only on an update of an
	// existing role): nothing says whose it is, so no sweep may take it; the test reports such a
	// role and deletes it itself, as docs/cleanup.md tells an administrator to.
	var late, unowned []string
	testenv.EventuallyExplained(t, "every Theta CSV deleted and Theta's bundled ClusterRole gone", func(ctx context.Context) (bool, string, error) {
		csvs := &v1alpha1.ClusterServiceVersionList{}
		if err := c.Client.List(ctx, csvs); err != nil {
			return false, "", err
		}
		var left []string
		for i := range csvs.Items {
			csv := &csvs.Items[i]
			if !strings.HasPrefix(csv.Name, Theta.Name+".") {
				continue
			}
			left = append(left, fmt.Sprintf("%s/%s (deleting: %t, finalizers %v)", csv.Namespace, csv.Name, csv.DeletionTimestamp != nil, csv.Finalizers))
			if csv.DeletionTimestamp != nil {
				continue
			}
			if !slices.ContainsFunc(guarded, func(r uninstallResult) bool { return r.ns == csv.Namespace && slices.Contains(r.left, csv.Name) }) &&
				!slices.Contains(late, csv.Namespace+"/"+csv.Name+" "+string(csv.UID)) {
				late = append(late, csv.Namespace+"/"+csv.Name+" "+string(csv.UID))
			}
			if err := c.Client.Delete(ctx, csv); client.IgnoreNotFound(err) != nil {
				return false, "", err
			}
		}
		if len(left) > 0 {
			return false, "Theta CSVs " + strings.Join(left, ", "), nil
		}
		role := &rbacv1.ClusterRole{}
		err := c.Client.Get(ctx, client.ObjectKey{Name: Theta.BundledClusterRole()}, role)
		if err == nil && role.Labels[olm.OwnerLabel] == "" {
			if !slices.Contains(unowned, string(role.UID)) {
				unowned = append(unowned, string(role.UID))
			}
			uid := role.UID
			err = c.Client.Delete(ctx, role, client.Preconditions{UID: &uid})
			return false, "", client.IgnoreNotFound(err)
		}
		if err == nil {
			return false, fmt.Sprintf("no Theta CSV; ClusterRole %s (uid %s, labels %v, created %s)", role.Name, role.UID, role.Labels, role.CreationTimestamp), nil
		}
		return apierrors.IsNotFound(err), "", client.IgnoreNotFound(err)
	})
	if len(late) > 0 {
		t.Logf("with olmguard: CSVs created after their plan was gone, also deleted: %v", late)
	}
	if len(unowned) > 0 {
		t.Logf("with olmguard: %s created afresh by a late plan step with no olm.owner label (nothing names its operator), deleted by the test: uids %v",
			Theta.BundledClusterRole(), unowned)
	}
	checkLogs(t, o)
}

// checkOrphansReported: one doctor run over the cluster reports each CSV left in a namespace with
// no Subscription.
func checkOrphansReported(t *testing.T, c *cluster.Cluster, results []uninstallResult) {
	t.Helper()
	if len(orphans(results)) == 0 {
		return
	}
	_, out, errOut := procs.Doctor(t, context.Background(), c.Kubeconfig, "-A", "-o", "json")
	var report doctor.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("doctor -o json: %v\n%s\n%s", err, out, errOut)
	}
	reported := map[string]bool{}
	for _, f := range report.Findings {
		if f.Check == "CSVWithoutSubscription" {
			reported[f.Namespace+"/"+f.Name] = true
		}
	}
	for _, r := range results {
		for _, name := range r.left {
			if !reported[r.ns+"/"+name] {
				t.Errorf("doctor did not report %s/%s, left with no Subscription, as CSVWithoutSubscription", r.ns, name)
			}
		}
	}
}
