package tier

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestOperatorGroupGuard: on stock OLM a second OperatorGroup beside an installed operator makes
// OLM fail its CSV with reason TooManyOperatorGroups (OLM PR #669); with olmguard's
// --policy-operatorgroups=enforce the second OperatorGroup is denied, naming the first, and the
// CSV stays Succeeded.
func TestOperatorGroupGuard(t *testing.T) {
	declare(t, "guard: OperatorGroups", false)
	c, o := realOLM(t)
	ctx := context.Background()
	csvName := realolm.Beta.CSVName("1.0.0")
	second := func(ns string) *olmv1.OperatorGroup {
		return &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: ns}, Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{ns}}}
	}

	stock := operatorNamespace(t, c, "og-stock")
	subscribe(t, c, stock, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	waitCSV(t, c, stock, csvName)
	if err := c.Client.Create(ctx, second(stock)); err != nil {
		t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: stock, Name: csvName}, csv)
		return err == nil && csv.Status.Phase == v1alpha1.CSVPhaseFailed && csv.Status.Reason == "TooManyOperatorGroups", err
	}); err != nil {
		t.Fatalf("stock OLM %s: CSV %s/%s is %s (%s) with two OperatorGroups, want Failed (TooManyOperatorGroups): %v",
			o.Version, stock, csvName, csv.Status.Phase, csv.Status.Reason, err)
	}
	t.Logf("stock OLM %s: a second OperatorGroup failed the installed CSV: %s, %s", o.Version, csv.Status.Phase, csv.Status.Reason)
	// Leave the namespace as OLM can use it again.
	if err := c.Client.Delete(ctx, second(stock)); err != nil {
		t.Fatal(err)
	}

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client, "--policy-operatorgroups=enforce")
	guarded := operatorNamespace(t, c, "og-olmguard")
	subscribe(t, c, guarded, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	waitCSV(t, c, guarded, csvName)
	// The apiserver calls the webhook once it has read its configuration: dry runs until then.
	var err error
	if perr := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		err = c.Client.Create(ctx, second(guarded), client.DryRunAll)
		return apierrors.IsForbidden(err), nil
	}); perr != nil {
		t.Fatalf("with olmguard (enforce), a second OperatorGroup was never denied: last answer %v", err)
	}
	err = c.Client.Create(ctx, second(guarded))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "already has OperatorGroup og") || !strings.Contains(err.Error(), "TooManyOperatorGroups") {
		t.Fatalf("with olmguard (enforce), the second OperatorGroup: %v, want a denial naming OperatorGroup og", err)
	}
	t.Logf("with olmguard: %v", err)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: guarded, Name: csvName}, csv); err != nil || csv.Status.Phase != v1alpha1.CSVPhaseSucceeded {
		t.Errorf("with olmguard, CSV %s/%s is %s (%s), want Succeeded (err %v)", guarded, csvName, csv.Status.Phase, csv.Status.Reason, err)
	}
	checkLogs(t, o)
}
