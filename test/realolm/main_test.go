package realolm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// Version is the OLM release the tier runs by default (OLMGUARD_OLM_VERSION overrides it).
const Version = "v0.46.0"

// The catalog every test installs from.
var (
	Alpha = Package{Name: "alpha", Versions: []string{"1.0.0", "2.0.0", "3.0.0"}}
	Beta  = Package{Name: "beta", Versions: []string{"1.0.0"}}
	// Gamma and Delta are each installed once, by the F3 test, so no other CSV shares their
	// bundled ClusterRole: stock OLM, then olmguard, uninstalls them.
	Gamma = Package{Name: "gamma", Versions: []string{"1.0.0"}}
	Delta = Package{Name: "delta", Versions: []string{"1.0.0"}}
)

// CatalogName is the CatalogSource in OLM's namespace serving Alpha and Beta.
const CatalogName = "realolm"

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	// OLM's operators need OLM's own CRDs (Operator, OperatorCondition, OLMConfig, ...).
	if os.Getenv(testenv.EnvOLMCRDs) == "" {
		if root, err := testbin.RepoRoot(); err == nil {
			_ = os.Setenv(testenv.EnvOLMCRDs, filepath.Join(root, "..", "shared", "olm-crds"))
		}
	}
	fmt.Fprintf(os.Stderr, "[realolm] OLM under test: %s\n", version())
	cluster.Main(m, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d", os.Getpid())})
}

func version() string {
	if v := os.Getenv("OLMGUARD_OLM_VERSION"); v != "" {
		return v
	}
	return Version
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
		if _, err := os.Stat(os.Getenv(testenv.EnvOLMCRDs)); err != nil {
			shared.err = fmt.Errorf("OLM's CRDs: %w", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if shared.olm, shared.err = c.StartOLM(ctx, version()); shared.err != nil {
			return
		}
		// Not the first test's TempDir: every later test unpacks bundles from here.
		dir, images, err := WriteCatalog(filepath.Join(shared.olm.Dir(), "catalog"), Alpha, Beta, Gamma, Delta, Epsilon, Eta, Theta)
		if err != nil {
			shared.err = err
			return
		}
		shared.err = shared.olm.ServeCatalog(ctx, CatalogName, dir, images)
	})
	if shared.err != nil {
		t.Fatalf("starting OLM %s: %v", version(), shared.err)
	}
	return c, shared.olm
}

// operatorNamespace creates a fresh namespace with an OperatorGroup targeting it.
func operatorNamespace(t *testing.T, c *cluster.Cluster, prefix string) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "og", Namespace: ns.Name},
		Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{ns.Name}}}
	if err := c.Client.Create(ctx, og); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newSubscription is a Subscription to pkg from the test catalog.
func newSubscription(ns, name string, pkg Package, approval v1alpha1.Approval, startingCSV string) *v1alpha1.Subscription {
	return &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.SubscriptionSpec{Package: pkg.Name, Channel: "stable", CatalogSource: CatalogName,
			CatalogSourceNamespace: cluster.OLMNamespace, InstallPlanApproval: approval, StartingCSV: startingCSV}}
}

// subscribe creates a Subscription to pkg from the test catalog.
func subscribe(t *testing.T, c *cluster.Cluster, ns, name string, pkg Package, approval v1alpha1.Approval, startingCSV string) *v1alpha1.Subscription {
	t.Helper()
	sub := newSubscription(ns, name, pkg, approval, startingCSV)
	if err := c.Client.Create(context.Background(), sub); err != nil {
		t.Fatal(err)
	}
	return sub
}

// waitCSV waits until CSV name in ns reaches phase Succeeded.
func waitCSV(t *testing.T, c *cluster.Cluster, ns, name string) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	if err := csvSucceeded(c, ns, name); err != nil {
		t.Fatalf("CSV %s/%s never Succeeded: %v", ns, name, err)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

// TestInstall: a package installs on real OLM from the test catalog, its bundle unpacked on the
// host: the harness every other test stands on.
func TestInstall(t *testing.T) {
	c, o := realOLM(t)
	ns := operatorNamespace(t, c, "install")
	subscribe(t, c, ns, "beta", Beta, v1alpha1.ApprovalAutomatic, "")
	waitCSV(t, c, ns, Beta.CSVName("1.0.0"))
	if logs, err := o.Logs(); err == nil && strings.Contains(logs, "panic") {
		t.Errorf("OLM panicked: see its logs")
	}
}

// waitNoPlanInstalling waits until no InstallPlan of ns is Installing: a plan that is executes to
// its end whether or not its Subscription and CSVs still exist, and recreates what it lists.
func waitNoPlanInstalling(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	testenv.Eventually(t, "no plan Installing in "+ns, func(ctx context.Context) (bool, error) {
		plans := &v1alpha1.InstallPlanList{}
		if err := c.Client.List(ctx, plans, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return !slices.ContainsFunc(plans.Items, func(p v1alpha1.InstallPlan) bool {
			return p.DeletionTimestamp == nil && p.Status.Phase == v1alpha1.InstallPlanPhaseInstalling
		}), nil
	})
}

// poll waits up to testenv.Patience for cond, polling every 100 ms.
func poll(cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, cond)
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
