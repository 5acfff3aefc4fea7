package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// clusterOperatorName is the ClusterOperator olm-operator reports status in here, as OpenShift's
// olm-operator does with --writePackageServerStatusName=operator-lifecycle-manager-packageserver.
const clusterOperatorName = "olmguard-test-packageserver"

// loopLines is how many of OLM's "<csv> replaced by <csv>" lines make a loop: the status handler
// logs that line once per step of its walk (GetFinalCSVInReplacing), and a CSV that does not
// replace itself is never logged as replaced by itself at all.
const loopLines = 5000

// loopLine is the line olm-operator's replacement walk logs at each step from a CSV that
// replaces itself (OLM v0.46.0, logrus text format).
func loopLine(name string) string { return fmt.Sprintf("msg=\"%s replaced by %s\"", name, name) }

// selfReplacingCSV is a CSV labelled for ClusterOperator status whose spec.replaces is its own name.
func selfReplacingCSV(ns, name string) *v1alpha1.ClusterServiceVersion {
	return &v1alpha1.ClusterServiceVersion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{olm.ClusterOperatorNameLabel: clusterOperatorName}},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, Version: "1.0.0", Replaces: name,
			InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment", StrategySpec: runtime.RawExtension{Raw: []byte(`{"deployments":[]}`)}}},
	}
}

// lineCounter counts, in a growing log file, the lines that contain a string, reading each byte
// once (the file of a looping olm-operator grows by megabytes a second).
type lineCounter struct {
	path, needle string
	offset       int64
	partial      []byte
	count        int
	sample       string
}

func (l *lineCounter) read() (int, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return l.count, err
	}
	defer f.Close()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return l.count, err
	}
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		l.offset += int64(n)
		l.partial = append(l.partial, buf[:n]...)
		lines := bytes.Split(l.partial, []byte("\n"))
		l.partial = append([]byte(nil), lines[len(lines)-1]...)
		for _, line := range lines[:len(lines)-1] {
			if bytes.Contains(line, []byte(l.needle)) {
				l.count++
				if l.sample == "" {
					l.sample = string(line)
				}
			}
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return l.count, nil
		}
		if err != nil {
			return l.count, err
		}
	}
}

// growing waits until the count passes more than after.
func (l *lineCounter) growing(ctx context.Context, after int) (int, error) {
	var n int
	err := testenv.Poll(ctx, func(context.Context) (bool, error) {
		var err error
		n, err = l.read()
		return n > after, err
	})
	return n, err
}

// TestReplacesCycle (OCPBUGS-23954, OLM #3891): on stock OLM whose olm-operator reports
// ClusterOperator status (--writePackageServerStatusName, as on OpenShift), a CSV labelled
// olm.clusteroperator.name whose spec.replaces is its own name makes olm-operator loop: its
// "<csv> replaced by <csv>" lines pass thousands and keep growing across reads, and keep growing
// after the CSV is deleted. On a cluster of its own: the loop spins olm-operator until it stops, which would
// disturb every other scenario; OLM is stopped as soon as the loop is shown. With olmguard's
// --policy-replaces-cycle=enforce the same CSV is refused, citing OCPBUGS-23954; in warn (the
// default) it is admitted with the warning. Fails without the guard: the CSV was admitted
// silently in both modes.
func TestReplacesCycle(t *testing.T) {
	declare(t, "N1: spec.replaces cycle (OCPBUGS-23954)", false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := must(cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d-cycle", os.Getpid()), Nodes: 1}))(t)
	t.Cleanup(func() { _ = c.Stop() })
	o := must(c.StartOLMWith(ctx, version(), cluster.OLMOptions{OLMArgs: []string{"--writePackageServerStatusName=" + clusterOperatorName}}))(t)
	t.Cleanup(o.Stop)
	name := "cycle-stock.v1.0.0"

	t.Run("stock", func(t *testing.T) {
		defer o.Stop() // the loop spins a core until olm-operator stops
		ns := operatorNamespace(t, c, "cycle-stock")
		if err := c.Client.Create(ctx, selfReplacingCSV(ns, name)); err != nil {
			t.Fatal(err)
		}
		lines := &lineCounter{path: filepath.Join(o.Dir(), "olm.log"), needle: loopLine(name)}
		first, err := lines.growing(ctx, loopLines)
		if err != nil {
			t.Fatalf("stock OLM %s: %d log lines say CSV %s replaced by itself, want more than %d (a loop): %v", o.Version, first, name, loopLines, err)
		}
		second, err := lines.growing(ctx, first)
		if err != nil {
			t.Fatalf("stock OLM %s: the lines naming CSV %s stopped at %d: %v", o.Version, name, second, err)
		}
		t.Logf("stock OLM %s: %d, then %d log lines say CSV %s replaced by itself: %s", o.Version, first, second, name, lines.sample)
		csv := selfReplacingCSV(ns, name)
		if err := c.Client.Delete(ctx, csv); err != nil {
			t.Fatal(err)
		}
		deleted, err := lines.read()
		if err != nil {
			t.Fatal(err)
		}
		after, err := lines.growing(ctx, deleted)
		if err != nil {
			t.Fatalf("stock OLM %s: the loop on CSV %s ended after its deletion at %d lines: %v", o.Version, name, after, err)
		}
		err = c.Client.Get(ctx, client.ObjectKeyFromObject(csv), csv)
		t.Logf("stock OLM %s: deleting the CSV does not end the loop: %d lines at the delete, %d after (the CSV: %v, finalizers %v)",
			o.Version, deleted, after, errOrTerminating(err, csv), csv.Finalizers)
	})

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode string
		args []string
	}{{"enforce", []string{"--policy-replaces-cycle=enforce"}}, {"warn", nil}} {
		t.Run("olmguard-"+tc.mode, func(t *testing.T) {
			procs.RunWebhook(t, c.Kubeconfig, c.Client, tc.args...)
			ns := operatorNamespace(t, c, "cycle-"+tc.mode)
			wc, warnings := testenv.WarningClient(t, c.Config, testenv.Scheme())
			csv := selfReplacingCSV(ns, "cycle-"+tc.mode+".v1.0.0")
			// The apiserver calls the webhook once it has read its configuration: dry runs until then.
			var err error
			if perr := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
				err = wc.Create(ctx, csv.DeepCopy(), client.DryRunAll)
				return apierrors.IsForbidden(err) || strings.Contains(warnings.Take(), "OCPBUGS-23954"), nil
			}); perr != nil {
				t.Fatalf("olmguard (%s) never answered the self-replacing CSV: last answer %v", tc.mode, err)
			}
			err = wc.Create(ctx, csv)
			got := warnings.Take()
			switch tc.mode {
			case "enforce":
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "replaces itself") || !strings.Contains(err.Error(), "OCPBUGS-23954") ||
					!strings.Contains(err.Error(), "restart olm-operator") {
					t.Fatalf("with olmguard (enforce): %v, want the denial naming the CSV, OCPBUGS-23954 and the recovery", err)
				}
				t.Logf("with olmguard (enforce): %v", err)
			default:
				if err != nil || !strings.Contains(got, "CSV "+csv.Name+" in namespace "+ns+" replaces itself") {
					t.Fatalf("with olmguard (warn): %v, warnings %q, want it admitted with the warning", err, got)
				}
				t.Logf("with olmguard (warn): admitted with %q", got)
			}
		})
	}
}

func errOrTerminating(err error, csv *v1alpha1.ClusterServiceVersion) string {
	switch {
	case apierrors.IsNotFound(err):
		return "gone"
	case err != nil:
		return err.Error()
	case csv.DeletionTimestamp != nil:
		return "Terminating"
	}
	return "still there"
}
