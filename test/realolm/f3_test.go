package realolm

import (
	"context"
	"fmt"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// uninstalled installs pkg in a fresh namespace, creates one operand, then uninstalls the
// operator as a user does (delete the Subscription, then the CSV) and waits until the CSV is gone.
// It returns the namespace and whether the bundled ClusterRole and the operand are left.
func uninstalled(t *testing.T, c *cluster.Cluster, pkg Package, prefix string) (ns string, roleLeft, operandLeft bool) {
	t.Helper()
	ctx := context.Background()
	ns = operatorNamespace(t, c, prefix)
	sub := subscribe(t, c, ns, pkg.Name, pkg, v1alpha1.ApprovalAutomatic, "")
	csv := waitCSV(t, c, ns, pkg.CSVName(pkg.Versions[0]))
	// A user uninstalls a settled operator: the CSV can be Succeeded while its plan is still
	// Installing, and a plan that is re-creates a CSV deleted under it (see
	// TestF3UninstallDuringUpgrade for that race).
	waitSubscriptionAtLatest(t, c.Client, ns, sub.Name)
	waitNoPlanInstalling(t, c, ns)
	operand := &unstructured.Unstructured{}
	operand.SetGroupVersionKind(schema.GroupVersionKind{Group: pkg.Group(), Version: "v1", Kind: "Widget"})
	operand.SetNamespace(ns)
	operand.SetName("data")
	if err := c.Client.Create(ctx, operand); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: pkg.BundledClusterRole()}, role); err != nil {
		t.Fatalf("OLM did not create the bundled ClusterRole: %v", err)
	}
	if err := c.Client.Delete(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Delete(ctx, csv); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "CSV "+ns+"/"+csv.Name+" deleted", func(ctx context.Context) (bool, error) {
		now := &v1alpha1.ClusterServiceVersion{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(csv), now)
		if err == nil && now.UID != csv.UID {
			return false, fmt.Errorf("OLM recreated CSV %s/%s after the uninstall (uid %s, was %s)", ns, csv.Name, now.UID, csv.UID)
		}
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	roleErr := c.Client.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.ClusterRole{})
	operandErr := c.Client.Get(ctx, client.ObjectKeyFromObject(operand), operand.DeepCopy())
	return ns, roleErr == nil, operandErr == nil
}

// TestF3Uninstall: stock OLM leaves the bundle's ClusterRole behind after an uninstall (OLM
// #2985); with olmguard it is deleted, and the operator's data stays (operand cleanup is opt-in).
func TestF3Uninstall(t *testing.T) {
	c, o := realOLM(t)
	_, stockRole, stockOperand := uninstalled(t, c, Gamma, "f3-stock")
	t.Logf("stock OLM %s: bundled ClusterRole left after uninstall: %v; operand left: %v", o.Version, stockRole, stockOperand)

	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client)
	procs.RunController(t, c.Kubeconfig)
	ns, role, operand := uninstalled(t, c, Delta, "f3-olmguard")
	if role {
		t.Errorf("with olmguard, the bundled ClusterRole %s survived the uninstall from %s", Delta.BundledClusterRole(), ns)
	}
	if !operand {
		t.Errorf("with olmguard and operand cleanup opt-in, the operand in %s was deleted though the CSV did not opt in", ns)
	}
	checkUnpackJobs(t, c)
	checkLogs(t, o)
}

// checkUnpackJobs: the unpack Jobs OLM created while olmguard ran carry olmguard's namespace-scoped
// names (OLM #3210), and OLM made one Job per unpack ConfigMap: it found the renamed Job and never
// unpacked a bundle twice.
func checkUnpackJobs(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	jobs := &batchv1.JobList{}
	if err := c.Client.List(context.Background(), jobs, client.InNamespace(cluster.OLMNamespace)); err != nil {
		t.Fatal(err)
	}
	perConfigMap := map[string][]string{}
	renamed := 0
	for _, j := range jobs.Items {
		if cm := unpack.ConfigMapOwner(&j); cm != "" {
			perConfigMap[cm] = append(perConfigMap[cm], j.Name)
		}
		if strings.HasPrefix(j.Name, unpack.NamePrefix) {
			renamed++
		}
	}
	if renamed == 0 {
		t.Errorf("no unpack Job carries olmguard's name though olmguard ran during an install: %v", perConfigMap)
	}
	for cm, names := range perConfigMap {
		if len(names) > 1 {
			t.Errorf("unpack ConfigMap %s has %d Jobs %v: OLM unpacked a bundle twice", cm, len(names), names)
		}
	}
}
