// Package tier is olmguard's real-OLM tier (make test-realolm): each fix checked on OLM's own
// operators, stock beside olmguard, with the scenarios of test/realolm.
package tier

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	if err := realolm.UseOLMCRDs(); err != nil {
		fmt.Fprintf(os.Stderr, "[realolm] %v\n", err)
		os.Exit(1)
	}
	layout := cluster.LayoutFor(version())
	realolm.CatalogNamespace = layout.CatalogNamespace
	fmt.Fprintf(os.Stderr, "[realolm] OLM under test: %s (in %s, global catalogs in %s); %s; F4 replays an upgrade from %s to %s\n",
		version(), layout.Namespace, layout.CatalogNamespace, scopeLine(), realolm.OLMBefore, realolm.OLMAfter)
	code := cluster.Run(m, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d", os.Getpid())})
	stopGlobal()
	os.Exit(code)
}

func version() string {
	if v := os.Getenv("OLMGUARD_OLM_VERSION"); v != "" {
		return v
	}
	return realolm.Version
}

var shared struct {
	once sync.Once
	olm  *cluster.OLM
	err  error
}

// realOLM returns the cluster with OLM running and the test catalog READY, started once per
// test binary.
func realOLM(t *testing.T) (*cluster.Cluster, *cluster.OLM) {
	t.Helper()
	c := cluster.Shared(t)
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		shared.olm, shared.err = realolm.StartOLM(ctx, c, version(), realolm.Alpha, realolm.Beta, realolm.Gamma, realolm.Delta, realolm.Iota, Epsilon, Eta, Theta)
		noteKubeVersion(c)
	})
	if shared.err != nil {
		t.Fatalf("starting OLM %s: %v", version(), shared.err)
	}
	return c, shared.olm
}

var global struct {
	once sync.Once
	c    *cluster.Cluster
	olm  *cluster.OLM
	err  error
}

// globalOLM returns a second cluster, with OLM running and Omega in its catalog, for the scenarios
// that install into the global operators namespace: OLM copies such a CSV into every namespace
// and they change cluster-wide settings (OLMConfig), so that an uninstall OLM undoes late (a CSV
// it creates again from a stale plan) reaches no other scenario's namespace. Started once per
// test binary, stopped by TestMain.
func globalOLM(t *testing.T) (*cluster.Cluster, *cluster.OLM) {
	t.Helper()
	global.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		global.c, global.err = cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d-global", os.Getpid()), Nodes: 1})
		if global.err == nil {
			global.olm, global.err = realolm.StartOLM(ctx, global.c, version(), Omega)
			noteKubeVersion(global.c)
		}
	})
	if global.err != nil {
		t.Fatalf("starting the global-namespace cluster with OLM %s: %v", version(), global.err)
	}
	return global.c, global.olm
}

// stopGlobal stops globalOLM's cluster, if a test started it.
func stopGlobal() {
	if global.c == nil {
		return
	}
	if global.olm != nil {
		global.olm.Stop()
	}
	if err := global.c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "[cluster] deleting %s: %v\n", global.c.Name, err)
	}
}

// must(f())(t) is f's value, or the test fails on f's error.
// clusterOfItsOwn starts a one-node cluster for a scenario that cannot share the tier's (an OLM
// of another release or other flags), named after the tier's process and suffix, stopped when the
// test ends.
func clusterOfItsOwn(ctx context.Context, t *testing.T, suffix string) *cluster.Cluster {
	t.Helper()
	c := must(cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d-%s", os.Getpid(), suffix), Nodes: 1}))(t)
	t.Cleanup(func() { _ = c.Stop() })
	noteKubeVersion(c)
	return c
}

// noteKubeVersion keeps the kube-apiserver version of c for the recorded results, from whichever
// cluster runs first: every cluster of the tier runs the same binaries, and a test on a cluster of
// its own may end before the shared cluster starts (its result then named no Kubernetes version).
func noteKubeVersion(c *cluster.Cluster) {
	v, err := c.Clientset.Discovery().ServerVersion()
	if err != nil {
		return
	}
	resultsMu.Lock()
	defer resultsMu.Unlock()
	if kubeVersion == "" {
		kubeVersion = v.GitVersion
	}
}

// waitOwnedBy waits until the plan of r is owned by its Subscription B.
func waitOwnedBy(t *testing.T, c *cluster.Cluster, r realolm.F1Result, what string) {
	t.Helper()
	testenv.Eventually(t, what+" "+r.NS+"/"+r.Plan.Name, func(ctx context.Context) (bool, error) {
		p := &v1alpha1.InstallPlan{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(r.Plan), p)
		return err == nil && scenario.OwnedBy(p, r.Sub.UID), err
	})
}

// waitPlansGone waits until the InstallPlans of ns are garbage-collected with their Subscription.
func waitPlansGone(t *testing.T, c client.Client, ns string) {
	t.Helper()
	if err := realolm.PlansGone(context.Background(), c, ns); err != nil {
		t.Fatal(err)
	}
}

func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// operatorNamespace creates a fresh namespace with an OperatorGroup targeting it.
func operatorNamespace(t *testing.T, c *cluster.Cluster, prefix string) string {
	t.Helper()
	return must(realolm.OperatorNamespace(context.Background(), c.Client, prefix))(t)
}

// subscribe creates a Subscription to pkg from the test catalog.
func subscribe(t *testing.T, c *cluster.Cluster, ns, name string, pkg realolm.Package, approval v1alpha1.Approval, startingCSV string) *v1alpha1.Subscription {
	t.Helper()
	sub := realolm.NewSubscription(ns, name, pkg, approval, startingCSV)
	if err := c.Client.Create(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	return sub
}

// waitCSV waits until CSV name in ns reaches phase Succeeded.
func waitCSV(t *testing.T, c *cluster.Cluster, ns, name string) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	ctx := context.Background()
	if err := realolm.CSVSucceeded(ctx, c.Client, ns, name); err != nil {
		t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

// TestInstall: a package installs on real OLM from the test catalog, its bundle unpacked on the
// host: the harness every other test stands on.
func TestInstall(t *testing.T) {
	declare(t, "install from a catalog", true)
	c, o := realOLM(t)
	ns := operatorNamespace(t, c, "install")
	subscribe(t, c, ns, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	waitCSV(t, c, ns, realolm.Beta.CSVName("1.0.0"))
	if logs, err := o.Logs(); err == nil && strings.Contains(logs, "panic") {
		t.Errorf("OLM panicked: see its logs")
	}
}

// checkLogs fails the test on what olmguard must never cause in OLM: a request its webhook denied
// or failed (the apiserver names the webhook, *.olmguard.io, in both), or a server-side apply of
// OLM's that conflicts with a field olmguard wrote (the apiserver names the field manager, which
// is olmguard's program name: "conflict with \"olmguard-controller\"").
func checkLogs(t *testing.T, o *cluster.OLM) {
	t.Helper()
	logs, err := o.Logs()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(logs, "\n") {
		for _, bad := range []string{"olmguard.io", "denied the request", `with "olmguard`, `with \"olmguard`} {
			if strings.Contains(line, bad) {
				t.Errorf("OLM logged %q: %s", bad, line)
			}
		}
	}
}
