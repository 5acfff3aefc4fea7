package tier

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
)

// TestF3Uninstall: stock OLM leaves the bundle's ClusterRole behind after an uninstall (OLM
// #2985); with olmguard it is deleted, and the operator's data stays unless its CSV opted in to
// operand cleanup (spec.cleanup.enabled), in which case it goes too.
func TestF3Uninstall(t *testing.T) {
	declare(t, "F3: cleanup after uninstall", true)
	c, o := realOLM(t)
	stock := must(realolm.Uninstall(context.Background(), c.Client, realolm.Gamma, "f3-stock"))(t)
	t.Logf("stock OLM %s: bundled ClusterRole left after uninstall: %v (labelled olm.owner by OLM: %v); operand left: %v; CSVs OLM created again: %d; ClusterRole OLM created again: %v",
		o.Version, stock.RoleLeft, stock.RoleLabelled, stock.OperandLeft, stock.Recreated, stock.RoleCreatedAgain)

	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client)
	procs.RunController(t, c.Kubeconfig)
	guarded := must(realolm.Uninstall(context.Background(), c.Client, realolm.Delta, "f3-olmguard"))(t)
	t.Logf("with olmguard: bundled ClusterRole labelled olm.owner by OLM: %v; CSVs OLM created again after the uninstall: %d; ClusterRole OLM created again (a late plan step, labelled olm.managed alone): %v",
		guarded.RoleLabelled, guarded.Recreated, guarded.RoleCreatedAgain)
	// OLM labels the bundled ClusterRole olm.owner only when it applies the plan step a second
	// time (its first status write of the plan lost to a conflict): without that label nothing
	// OLM wrote ties the role to the CSV, and olmguard keeps it (docs/cleanup.md, "A bundled ClusterRole OLM applied once").
	if why := guarded.UnlabelledRole(); why != "" {
		t.Logf("with olmguard: %s; left: %v", why, guarded.RoleLeft)
	}
	if guarded.RoleLeftLabelled() {
		t.Errorf("with olmguard, the bundled ClusterRole %s, labelled olm.owner=%s, survived the uninstall from %s", realolm.Delta.BundledClusterRole(), realolm.Delta.CSVName("1.0.0"), guarded.NS)
	}
	if !guarded.OperandLeft {
		t.Errorf("with olmguard and operand cleanup opt-in, the operand in %s was deleted though the CSV did not opt in", guarded.NS)
	}
	optedIn := must(realolm.Uninstall(context.Background(), c.Client, realolm.Iota, "f3-olmguard-opted-in"))(t)
	if why := optedIn.UnlabelledRole(); why != "" {
		t.Logf("with olmguard, %s: %s; left: %v", realolm.Iota.Name, why, optedIn.RoleLeft)
	}
	if optedIn.RoleLeftLabelled() || optedIn.OperandLeft {
		t.Errorf("with olmguard, uninstalling %s, whose CSV sets spec.cleanup.enabled, left its bundled ClusterRole (%v) or its operand (%v) in %s",
			realolm.Iota.Name, optedIn.RoleLeft, optedIn.OperandLeft, optedIn.NS)
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
	if err := c.Client.List(context.Background(), jobs, client.InNamespace(realolm.CatalogNamespace)); err != nil {
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
