package tier

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/uninstall"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// Omega is realolm.Omega, served by the catalog of globalOLM's cluster.
var Omega = realolm.Omega

// olmPlanRetries is how often OLM's catalog operator syncs one InstallPlan again after an error
// (its queue's retry limit): the most times a stale plan can create its CSV again.
const olmPlanRetries = 8

// TestAllNamespacesInstall installs an operator as most OpenShift users do: a Subscription in the
// global operators namespace (openshift-operators, whose OperatorGroup targets every namespace;
// on upstream builds `operators` with such a group, as upstream's install has). OLM copies the CSV into every other
// namespace. With olmguard: the original carries olmguard's cleanup finalizer, OLM's copies do not
// (olmguard never holds up OLM's own deletion of a copy), and an uninstall removes the original
// and every copy.
func TestAllNamespacesInstall(t *testing.T) {
	declare(t, "AllNamespaces install in the global operators namespace", false)
	c, o := globalOLM(t)
	ctx := context.Background()
	global := must(realolm.GlobalOperators(ctx, c.Client, o))(t)
	other := must(testenv.NewNamespace(ctx, c.Client, "copy-target"))(t)
	// Runs once olmguard has stopped (cleanups run last first), as `kubectl olmguard uninstall`
	// would: a CSV OLM made again in the global namespace while olmguard's webhook was still
	// registered keeps olmguard's finalizer with no controller left to remove it, and
	// TestCopiedCSVsReported, next on this cluster, could not delete it (seen on openshift-4.20).
	t.Cleanup(func() {
		if n, err := uninstall.ReleaseFinalizers(context.Background(), c.Client, global, io.Discard); err != nil {
			t.Error(err)
		} else if n > 0 {
			t.Logf("released olmguard's finalizer from %d CSV(s) left in %s after olmguard stopped", n, global)
		}
	})
	runOlmguard(t, c)

	sub := subscribe(t, c, global, Omega.Name, Omega, v1alpha1.ApprovalAutomatic, "")
	name := Omega.CSVName("1.0.0")
	original := waitCSV(t, c, global, name)
	if !slices.Contains(original.Finalizers, olmguard.CleanupFinalizer) {
		t.Errorf("the CSV %s/%s lacks olmguard's finalizer: %v", global, name, original.Finalizers)
	}
	copied := &v1alpha1.ClusterServiceVersion{}
	testenv.EventuallyExplained(t, "OLM's copy of "+name+" in "+other, func(ctx context.Context) (bool, string, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: other, Name: name}, copied); err != nil {
			return false, err.Error(), client.IgnoreNotFound(err)
		}
		return copied.Labels[olm.CopiedFromLabel] == global && copied.Status.Reason == v1alpha1.CSVReasonCopied,
			fmt.Sprintf("labels %v, reason %q", copied.Labels, copied.Status.Reason), nil
	})
	if slices.Contains(copied.Finalizers, olmguard.CleanupFinalizer) {
		t.Errorf("OLM's copy %s/%s carries olmguard's finalizer: %v", other, name, copied.Finalizers)
	}
	// The uninstall starts once OLM has copied the CSV into every namespace, as an administrator's
	// would.
	testenv.EventuallyExplained(t, "OLM's copies of "+name+" in every namespace", func(ctx context.Context) (bool, string, error) {
		nss := &corev1.NamespaceList{}
		if err := c.Client.List(ctx, nss); err != nil {
			return false, "", err
		}
		copies, err := copiesOf(ctx, c.Client, global, name)
		if err != nil {
			return false, "", err
		}
		has := map[string]bool{}
		for _, csv := range copies {
			if csv.Status.Reason == v1alpha1.CSVReasonCopied {
				has[csv.Namespace] = true
			}
		}
		var missing []string // Active namespaces only: OLM copies into no terminating one
		for _, ns := range nss.Items {
			if ns.Name != global && ns.Status.Phase == corev1.NamespaceActive && !has[ns.Name] {
				missing = append(missing, ns.Name)
			}
		}
		return len(missing) == 0, fmt.Sprintf("no copy yet in %v", missing), nil
	})

	// The Subscription first, then the CSV once its plans are garbage-collected with it: OLM can
	// execute a plan again after its CSV was deleted and recreate the CSV with no Subscription
	// (seen here on OpenShift 4.20 one second after the delete, olm-facts "Uninstalling while the
	// upgrade InstallPlan is still Installing"), whose copies would then reach every later scenario.
	waitSubscriptionAtLatest(t, c.Client, global, sub.Name)
	if err := realolm.NoPlanInstalling(ctx, c.Client, global); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Delete(ctx, sub); err != nil {
		t.Fatal(err)
	}
	waitPlansGone(t, c.Client, global)
	// OLM may also create the CSV again after DeleteCSV saw it gone (ci15, v0.46.0): its catalog
	// operator executes the plan as its informer cache still holds it, Installing, and retries a
	// sync whose status write failed (the plan is gone) up to 8 times, each one creating the CSV
	// anew (catalog/operator.go syncInstallPlans, v0.46.0). Each time, it is deleted again as an
	// administrator would, and its copies are awaited gone again. A CSV that comes back more often
	// than OLM retries fails the test.
	olmRecreated := false
	for round := 1; ; round++ {
		if recreated, err := realolm.DeleteCSV(ctx, c.Client, original); err != nil {
			t.Error(err)
		} else if recreated > 0 {
			olmRecreated = true
			t.Logf("OLM created %s/%s again %d time(s) after its delete; deleted again", global, name, recreated)
		}
		// Every copy goes with it, in every namespace: none is held by olmguard, and none is left to
		// show up in the later scenarios' namespaces. Unless OLM creates the CSV again once
		// DeleteCSV saw it gone: then its copies are OLM's again, and it is deleted once more.
		back := waitCopiesGoneOrCSVBack(t, c.Client, original, olmRecreated)
		if back == nil {
			break
		}
		if round == olmPlanRetries {
			t.Fatalf("the CSV %s/%s is back after the uninstall, round %d", global, name, round)
		}
		t.Logf("OLM created %s/%s again after its delete (round %d); deleting it again", global, name, round)
		original, olmRecreated = back, true
	}
	checkLogs(t, o)
}

// waitCopiesGoneOrCSVBack waits until OLM has deleted every copy of the deleted CSV original, and
// returns nil; or until OLM has created original again (a new object of its name), and returns
// that. Copies left, whatever holds them, fail the test with their finalizers.
//
// Once OLM has created the CSV again after a delete (olmRecreated), OLM itself leaves copies
// behind: its copy GC (removeDanglingChildCSVs, olm-facts §3.2) ran for the first CSV while the
// one it created again, of the same name, existed; and that one, deleted before OLM had written
// its OperatorGroup annotations, requeued no copy when it went (ci41, v0.46.0: copies left in
// three namespaces, none with a finalizer, for two minutes). With the CSV gone, the test then
// deletes what OLM left, as an administrator would; a copy held by olmguard's finalizer is left
// alone and still fails the test.
func waitCopiesGoneOrCSVBack(t *testing.T, c client.Client, original *v1alpha1.ClusterServiceVersion, olmRecreated bool) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	var back *v1alpha1.ClusterServiceVersion
	testenv.EventuallyExplained(t, "no copy of "+original.Name+" left, or the CSV created again", func(ctx context.Context) (bool, string, error) {
		csv := &v1alpha1.ClusterServiceVersion{}
		switch err := c.Get(ctx, client.ObjectKeyFromObject(original), csv); {
		case err == nil && csv.UID != original.UID && csv.DeletionTimestamp == nil:
			back = csv
			return true, "", nil
		case client.IgnoreNotFound(err) != nil:
			return false, "", err
		}
		copies, err := copiesOf(ctx, c, original.Namespace, original.Name)
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, copied := range copies {
			left = append(left, copied.Namespace+" (finalizers "+fmt.Sprint(copied.Finalizers)+")")
			held := slices.Contains(copied.Finalizers, olmguard.CleanupFinalizer)
			if olmRecreated && !held && copied.DeletionTimestamp == nil {
				t.Logf("deleting the copy %s/%s OLM left after creating %s again", copied.Namespace, copied.Name, original.Name)
				uid := copied.UID
				if err := c.Delete(ctx, &copied, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
					return false, "", err
				}
			}
		}
		return len(left) == 0, fmt.Sprintf("copies left in %v", left), nil
	})
	return back
}

// copiesOf lists OLM's copies of CSV name of namespace global, in every namespace.
func copiesOf(ctx context.Context, c client.Client, global, name string) ([]v1alpha1.ClusterServiceVersion, error) {
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if err := c.List(ctx, csvs, client.MatchingLabels{olm.CopiedFromLabel: global}); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(csvs.Items, func(csv v1alpha1.ClusterServiceVersion) bool { return csv.Name != name }), nil
}
