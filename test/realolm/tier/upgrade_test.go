package tier

import (
	"context"
	"slices"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// upgradeChain installs Alpha v1 with Manual approval, then approves the upgrades to v2 and v3 one
// plan at a time, as an administrator does. After each step the new CSV has Succeeded and the one
// it replaces is gone; an operand created on v1 is there at the end.
//
// Stock OLM may stop on the way: when it resolves the next upgrade while the replaced CSV is still
// being deleted, the resolution fails as unsatisfiable and OLM never retries it (the race
// olmguard's subscription-drift nudges, drift.StaleResolution). With stock set, that ends the
// chain with a log line and "" instead of failing the test.
func upgradeChain(t *testing.T, c *cluster.Cluster, prefix string, stock bool) string {
	t.Helper()
	ctx := context.Background()
	ns := operatorNamespace(t, c, prefix)
	sub := subscribe(t, c, ns, "alpha", realolm.Alpha, v1alpha1.ApprovalManual, realolm.Alpha.CSVName(realolm.Alpha.Versions[0]))
	operand := &unstructured.Unstructured{}
	operand.SetGroupVersionKind(schema.GroupVersionKind{Group: realolm.Alpha.Group(), Version: "v1", Kind: "Widget"})
	operand.SetNamespace(ns)
	operand.SetName("data")
	for i, v := range realolm.Alpha.Versions {
		csv := realolm.Alpha.CSVName(v)
		if !approvePlanFor(t, c, sub, csv, stock) {
			t.Logf("stock OLM stuck before %s in %s: its resolution failed on a replaced CSV that is gone since, and OLM does not retry", csv, ns)
			return ""
		}
		waitCSV(t, c, ns, csv)
		if i == 0 {
			if err := c.Client.Create(ctx, operand); err != nil {
				t.Fatal(err)
			}
			continue
		}
		prev := client.ObjectKey{Namespace: ns, Name: realolm.Alpha.CSVName(realolm.Alpha.Versions[i-1])}
		testenv.Eventually(t, "the replaced CSV "+prev.String()+" is gone", func(ctx context.Context) (bool, error) {
			err := c.Client.Get(ctx, prev, &v1alpha1.ClusterServiceVersion{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(operand), operand.DeepCopy()); err != nil {
		t.Errorf("the operand created on v1 did not survive the upgrades: %v", err)
	}
	csvs, err := realolm.OwnCSVs(ctx, c.Client, ns)
	if err != nil {
		t.Fatal(err)
	}
	for _, csv := range csvs {
		if csv.Name != realolm.Alpha.CSVName(realolm.Alpha.Versions[len(realolm.Alpha.Versions)-1]) || csv.DeletionTimestamp != nil {
			t.Errorf("after the upgrades %s/%s is left (deleting: %v, finalizers %v)", ns, csv.Name, csv.DeletionTimestamp != nil, csv.Finalizers)
		}
	}
	return ns
}

// approvePlanFor waits until the Subscription points at a plan that installs csv and approves it
// (realolm.ApprovePlanFor). With tolerateStuck, a resolution failure that blames CSVs gone since
// and lasts realolm.StaleFor returns false instead.
func approvePlanFor(t *testing.T, c *cluster.Cluster, sub *v1alpha1.Subscription, csv string, tolerateStuck bool) bool {
	t.Helper()
	return must(realolm.ApprovePlanFor(context.Background(), c.Client, sub, csv, tolerateStuck))(t)
}

// TestUpgrades: v1 -> v2 -> v3 approved one plan at a time succeed on stock OLM and with olmguard
// alike: each CSV Succeeded, the replaced ones gone (olmguard's finalizer released), the operand
// kept, and OLM logged no request denied by or failed in olmguard's webhooks.
func TestUpgrades(t *testing.T) {
	declare(t, "operator upgrades with olmguard", true)
	c, o := realOLM(t)
	upgradeChain(t, c, "upgrade-stock", true)
	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client)
	procs.RunController(t, c.Kubeconfig)
	ns := upgradeChain(t, c, "upgrade-olmguard", false)
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: realolm.Alpha.CSVName("3.0.0")}, csv); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
		t.Errorf("with olmguard running, %s lacks %s: %v", csv.Name, olmguard.CleanupFinalizer, csv.Finalizers)
	}
	checkLogs(t, o)
	t.Logf("OLM %s: v1 -> v2 -> v3 succeeded on stock and with olmguard", o.Version)
}
