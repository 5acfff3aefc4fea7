package tier

import (
	"context"
	"fmt"
	"os"
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
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// stockStuckFor is how long, after OLM logged the failed Job create, the stock install is
// watched for progress. Stuck is a claim that nothing happens: a slow machine cannot fail it.
const stockStuckFor = 20 * time.Second

// startUpgradeCluster starts a cluster of its own with OLM v0.25 serving Zeta, for this test.
func startUpgradeCluster(t *testing.T, suffix string) *realolm.UpgradeCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	u := must(realolm.StartUpgradeCluster(ctx, fmt.Sprintf("olmguard-realolm-%d-%s", os.Getpid(), suffix), nil))(t)
	t.Cleanup(func() { _ = u.C.Stop() })
	return u
}

// upgradeOLM upgrades the cluster's OLM to v0.28.
func upgradeOLM(t *testing.T, u *realolm.UpgradeCluster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := u.UpgradeOLM(ctx); err != nil {
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
	declare(t, "F4: unpack Jobs across an OLM upgrade (#3210)", false)
	if version() != realolm.Version {
		skipf(t, "replays the %s -> %s upgrade; OLM under test is %s", realolm.OLMBefore, realolm.OLMAfter, version())
	}
	unpackName := olm.UnpackName(realolm.Zeta.Image("1.0.0"))
	csv := realolm.Zeta.CSVName("1.0.0")

	// Each order has a cluster of its own: they run side by side.
	t.Run("stock, then olmguard after the failure", func(t *testing.T) {
		t.Parallel()
		u := startUpgradeCluster(t, "f4-after")
		first := must(u.InstallZeta(context.Background(), "f4-first"))(t)
		waitCSV(t, u.C, first, csv)
		job := &batchv1.Job{}
		if err := u.C.Client.Get(context.Background(), client.ObjectKey{Namespace: cluster.OLMNamespace, Name: unpackName}, job); err != nil {
			t.Fatalf("OLM %s left no unpack Job %s: %v", realolm.OLMBefore, unpackName, err)
		}
		if job.Labels[olm.BundleUnpackRefLabel] != "" {
			t.Fatalf("OLM %s labelled its unpack Job %v: the scenario needs an unlabelled one", realolm.OLMBefore, job.Labels)
		}

		upgradeOLM(t, u)
		second := must(u.InstallZeta(context.Background(), "f4-second"))(t)
		failure := fmt.Sprintf("jobs.batch %q already exists", unpackName)
		testenv.Eventually(t, "OLM "+realolm.OLMAfter+" logs "+failure, func(context.Context) (bool, error) {
			logs, err := u.OLM.Logs()
			return strings.Contains(logs, failure), err
		})
		time.Sleep(stockStuckFor)
		if err := u.C.Client.Get(context.Background(), client.ObjectKey{Namespace: second, Name: csv}, &v1alpha1.ClusterServiceVersion{}); err == nil {
			t.Fatalf("stock OLM %s installed %s in %s after logging %s: the #3210 scenario did not reproduce", realolm.OLMAfter, csv, second, failure)
		}
		t.Logf("stock OLM %s: the second install is stuck %s after %s", realolm.OLMAfter, stockStuckFor, failure)

		started := time.Now()
		runOlmguard(t, u.C)
		waitCSV(t, u.C, second, csv)
		t.Logf("olmguard installed after the failure: %s Succeeded in %s %s after olmguard started", csv, second, time.Since(started).Round(100*time.Millisecond))
		checkNudgedByController(t, u.C, second)
		checkLogs(t, u.OLM)
	})

	t.Run("olmguard from the start", func(t *testing.T) {
		t.Parallel()
		u := startUpgradeCluster(t, "f4-start")
		runOlmguard(t, u.C)
		created := watchJobNames(t, u.C)
		first := must(u.InstallZeta(context.Background(), "f4-first"))(t)
		waitCSV(t, u.C, first, csv)
		for _, name := range created.get() {
			if name != unpackName {
				t.Errorf("on OLM %s an unpack Job was created as %s, not OLM's %s: v0.25 finds its Jobs by name", realolm.OLMBefore, name, unpackName)
			}
		}
		t.Logf("OLM %s created unpack Jobs %v with olmguard running", realolm.OLMBefore, created.get())

		upgradeOLM(t, u)
		second := must(u.InstallZeta(context.Background(), "f4-second"))(t)
		waitCSV(t, u.C, second, csv)
		t.Logf("olmguard from the start: %s Succeeded in %s after the upgrade to %s", csv, second, realolm.OLMAfter)
		checkLogs(t, u.OLM)
	})
}

// checkNudgedByController: the Subscription in ns carries olmguard's resync annotation, written
// under the controller's own field manager (its user agent), so a user reading managedFields or a
// conflict message sees who wrote it.
func checkNudgedByController(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	sub := &v1alpha1.Subscription{}
	if err := c.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: realolm.Zeta.Name}, sub); err != nil {
		t.Fatal(err)
	}
	field := `"f:` + olmguard.ResyncAnnotation + `"`
	for _, m := range sub.ManagedFields {
		if m.FieldsV1 != nil && strings.Contains(m.FieldsV1.GetRawString(), field) {
			if m.Manager != "olmguard-controller" {
				t.Errorf("Subscription %s/%s: %s written by field manager %q, want olmguard-controller", ns, sub.Name, olmguard.ResyncAnnotation, m.Manager)
			}
			return
		}
	}
	t.Errorf("Subscription %s/%s was not nudged (no %s in its managedFields)", ns, sub.Name, olmguard.ResyncAnnotation)
}
