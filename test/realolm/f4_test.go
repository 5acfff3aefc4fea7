package realolm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// The OLM releases of F4's field scenario (OLM #3210): v0.25 finds unpack Jobs by name and leaves
// them unlabelled; v0.26 to v0.28 find them by label only.
const (
	olmBefore = "v0.25.0"
	olmAfter  = "v0.28.0"
)

// Zeta is the operator installed twice across the OLM upgrade.
var Zeta = Package{Name: "zeta", Versions: []string{"1.0.0"}}

// stockStuckFor is how long, after OLM logged the failed Job create, the stock install is
// watched for progress. Stuck is a claim that nothing happens: a slow machine cannot fail it.
const stockStuckFor = 20 * time.Second

// upgradeCluster is a cluster of its own running OLM v0.25 with a catalog serving Zeta.
type upgradeCluster struct {
	c       *cluster.Cluster
	olm     *cluster.OLM
	catalog string
	bundles map[string]string
}

func startUpgradeCluster(t *testing.T, suffix string) *upgradeCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d-%s", os.Getpid(), suffix), Nodes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	u := &upgradeCluster{c: c}
	if u.olm, err = c.StartOLM(ctx, olmBefore); err != nil {
		t.Fatal(err)
	}
	if u.catalog, u.bundles, err = WriteCatalog(filepath.Join(u.olm.Dir(), "catalog"), Zeta); err != nil {
		t.Fatal(err)
	}
	if err := u.olm.ServeCatalog(ctx, CatalogName, u.catalog, u.bundles); err != nil {
		t.Fatal(err)
	}
	return u
}

// upgradeOLM stops OLM v0.25 and starts v0.28 on the same cluster, as an OLM upgrade does.
func (u *upgradeCluster) upgradeOLM(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	u.olm.Stop()
	var err error
	if u.olm, err = u.c.StartOLM(ctx, olmAfter); err != nil {
		t.Fatal(err)
	}
	if err := u.olm.ServeCatalog(ctx, CatalogName, u.catalog, u.bundles); err != nil {
		t.Fatal(err)
	}
}

// jobNames records the names of the unpack Jobs created in OLM's namespace while it runs.
type jobNames struct {
	mu    sync.Mutex
	names []string
}

func watchJobNames(t *testing.T, c *cluster.Cluster) *jobNames {
	t.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w, err := wc.Watch(ctx, &batchv1.JobList{}, client.InNamespace(cluster.OLMNamespace))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	j := &jobNames{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if job, ok := ev.Object.(*batchv1.Job); ok && ev.Type == watch.Added {
				j.mu.Lock()
				j.names = append(j.names, job.Name)
				j.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); w.Stop(); <-done })
	return j
}

func (j *jobNames) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.names...)
}

// runOlmguard starts olmguard's webhook and controller (with extra flags) against the cluster
// until the test ends.
func runOlmguard(t *testing.T, c *cluster.Cluster, controllerFlags ...string) {
	t.Helper()
	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client)
	procs.RunController(t, c.Kubeconfig, controllerFlags...)
}

// installZeta subscribes to Zeta in a fresh namespace.
func installZeta(t *testing.T, c *cluster.Cluster, prefix string) string {
	t.Helper()
	ns := operatorNamespace(t, c, prefix)
	subscribe(t, c, ns, Zeta.Name, Zeta, v1alpha1.ApprovalAutomatic, "")
	return ns
}

// TestF4OLMUpgrade replays OLM #3210 as it happens in the field, on OLM's own binaries: v0.25
// installs an operator and leaves its unpack Job without labels; OLM is upgraded to v0.28, which
// looks unpack Jobs up by label only; a second install of the same bundle then fails with
// `jobs.batch "<hash>" already exists`. Three orders:
//   - stock: the second install is stuck, and OLM does not retry;
//   - olmguard installed after the failure: it removes the invisible Job and makes OLM resolve the
//     stuck namespace again, and the install succeeds;
//   - olmguard from the start: v0.25's Jobs keep OLM's names (v0.25 finds them by name) and the
//     second install succeeds.
func TestF4OLMUpgrade(t *testing.T) {
	if version() != Version {
		t.Skipf("replays the %s -> %s upgrade; OLM under test is %s", olmBefore, olmAfter, version())
	}
	unpackName := olm.UnpackName(Zeta.Image("1.0.0"))
	csv := Zeta.CSVName("1.0.0")

	t.Run("stock, then olmguard after the failure", func(t *testing.T) {
		u := startUpgradeCluster(t, "f4-after")
		first := installZeta(t, u.c, "f4-first")
		waitCSV(t, u.c, first, csv)
		job := &batchv1.Job{}
		if err := u.c.Client.Get(context.Background(), client.ObjectKey{Namespace: cluster.OLMNamespace, Name: unpackName}, job); err != nil {
			t.Fatalf("OLM %s left no unpack Job %s: %v", olmBefore, unpackName, err)
		}
		if job.Labels[olm.BundleUnpackRefLabel] != "" {
			t.Fatalf("OLM %s labelled its unpack Job %v: the scenario needs an unlabelled one", olmBefore, job.Labels)
		}

		u.upgradeOLM(t)
		second := installZeta(t, u.c, "f4-second")
		failure := fmt.Sprintf("jobs.batch %q already exists", unpackName)
		testenv.Eventually(t, "OLM "+olmAfter+" logs "+failure, func(context.Context) (bool, error) {
			logs, err := u.olm.Logs()
			return strings.Contains(logs, failure), err
		})
		time.Sleep(stockStuckFor)
		if err := u.c.Client.Get(context.Background(), client.ObjectKey{Namespace: second, Name: csv}, &v1alpha1.ClusterServiceVersion{}); err == nil {
			t.Fatalf("stock OLM %s installed %s in %s after logging %s: the #3210 scenario did not reproduce", olmAfter, csv, second, failure)
		}
		t.Logf("stock OLM %s: the second install is stuck %s after %s", olmAfter, stockStuckFor, failure)

		started := time.Now()
		runOlmguard(t, u.c)
		waitCSV(t, u.c, second, csv)
		t.Logf("olmguard installed after the failure: %s Succeeded in %s %s after olmguard started", csv, second, time.Since(started).Round(100*time.Millisecond))
		checkNudgedByController(t, u.c, second)
		checkLogs(t, u.olm)
	})

	t.Run("olmguard from the start", func(t *testing.T) {
		u := startUpgradeCluster(t, "f4-start")
		runOlmguard(t, u.c)
		created := watchJobNames(t, u.c)
		first := installZeta(t, u.c, "f4-first")
		waitCSV(t, u.c, first, csv)
		for _, name := range created.get() {
			if name != unpackName {
				t.Errorf("on OLM %s an unpack Job was created as %s, not OLM's %s: v0.25 finds its Jobs by name", olmBefore, name, unpackName)
			}
		}
		t.Logf("OLM %s created unpack Jobs %v with olmguard running", olmBefore, created.get())

		u.upgradeOLM(t)
		second := installZeta(t, u.c, "f4-second")
		waitCSV(t, u.c, second, csv)
		t.Logf("olmguard from the start: %s Succeeded in %s after the upgrade to %s", csv, second, olmAfter)
		checkLogs(t, u.olm)
	})
}

// checkNudgedByController: the Subscription in ns carries olmguard's resync annotation, written
// under the controller's own field manager (its user agent), so a user reading managedFields or a
// conflict message sees who wrote it.
func checkNudgedByController(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	sub := &v1alpha1.Subscription{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: Zeta.Name}, sub); err != nil {
		t.Fatal(err)
	}
	field := `"f:` + olmguard.ResyncAnnotation + `"`
	for _, m := range sub.ManagedFields {
		if m.FieldsV1 != nil && strings.Contains(string(m.FieldsV1.Raw), field) {
			if m.Manager != "olmguard-controller" {
				t.Errorf("Subscription %s/%s: %s written by field manager %q, want olmguard-controller", ns, sub.Name, olmguard.ResyncAnnotation, m.Manager)
			}
			return
		}
	}
	t.Errorf("Subscription %s/%s was not nudged (no %s in its managedFields)", ns, sub.Name, olmguard.ResyncAnnotation)
}
