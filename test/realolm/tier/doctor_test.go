package tier

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/drift"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// doctorChecks runs `kubectl olmguard doctor -n ns -o json` and returns its exit status and the
// checks it reported.
func doctorChecks(t *testing.T, c *cluster.Cluster, ns string) (int, []string) {
	t.Helper()
	code, report := doctorReport(t, c, ns)
	var checks []string
	for _, f := range report.Findings {
		checks = append(checks, f.Check)
	}
	return code, checks
}

// doctorReport runs `kubectl olmguard doctor -n ns -o json` with flags and returns its exit
// status and report.
func doctorReport(t *testing.T, c *cluster.Cluster, ns string, flags ...string) (int, doctor.Report) {
	t.Helper()
	code, out, errOut := procs.Doctor(t, context.Background(), c.Kubeconfig, append([]string{"-n", ns, "-o", "json"}, flags...)...)
	var report doctor.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("doctor -o json: %v\n%s\n%s", err, out, errOut)
	}
	return code, report
}

// finding returns the finding of check on name in report, failing the test without one.
func finding(t *testing.T, report doctor.Report, check, name string) doctor.Finding {
	t.Helper()
	for _, f := range report.Findings {
		if f.Check == check && f.Name == name {
			return f
		}
	}
	t.Fatalf("doctor did not report %s on %s: %+v", check, name, report.Findings)
	return doctor.Finding{}
}

// TestDoctor: on a healthy install by real OLM without olmguard, doctor reports only that olmguard
// does not run (one finding, not one per CSV); once olmguard runs, it reports nothing.
func TestDoctor(t *testing.T) {
	declare(t, "doctor on a stock cluster", true)
	c, _ := realOLM(t)
	ns := operatorNamespace(t, c, "doctor")
	subscribe(t, c, ns, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	csv := waitCSV(t, c, ns, realolm.Beta.CSVName("1.0.0"))

	code, checks := doctorChecks(t, c, ns)
	if code != 1 || !slices.Equal(checks, []string{"OlmguardNotRunning"}) {
		t.Errorf("doctor on stock OLM: exit %d, checks %v; want exit 1 and only OlmguardNotRunning", code, checks)
	}

	if err := c.CreateNamespace(context.Background(), olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	procs.RunWebhook(t, c.Kubeconfig, c.Client)
	procs.RunController(t, c.Kubeconfig)
	testenv.Eventually(t, "the controller adds its finalizer to "+csv.Name, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.ClusterServiceVersion{}
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(csv), got)
		return err == nil && slices.Contains(got.Finalizers, olmguard.CleanupFinalizer), err
	})
	// olmguard's finalizer is a CSV update that OLM reacts to, and OLM may rewrite the
	// Subscription's conditions some seconds later, past doctor's --recheck on a busy machine
	// (seen on openshift-4.20 under the full suite): a drift doctor reports then is OLM's lag,
	// which ends by itself or by olmguard's nudge. So doctor must end with nothing to report,
	// and may have reported nothing but such a drift on the way.
	testenv.EventuallyExplained(t, "doctor with olmguard running reports nothing", func(context.Context) (bool, string, error) {
		code, report := doctorReport(t, c, ns)
		for _, f := range report.Findings {
			if f.Check != "SubscriptionDrift" {
				t.Errorf("doctor with olmguard running: exit %d, %+v; want no finding but OLM's passing drift", code, f)
			}
		}
		if code == 0 && len(report.Findings) == 0 {
			return true, "", nil
		}
		t.Logf("doctor with olmguard running, not yet settled: exit %d, findings %+v", code, report.Findings)
		return false, fmt.Sprintf("exit %d, findings %+v", code, report.Findings), nil
	})
}

// TestDoctorOLMFailures: three failures as real OLM produces them, each reported by doctor with
// OLM's own words as evidence: two OperatorGroups (OLM fails the installed CSV with
// TooManyOperatorGroups), a CSV left behind by deleting only its Subscription that blocks a new
// Subscription to the same package (ConstraintsNotSatisfiable; the fix doctor prints lets it
// install), and a catalog whose address points nowhere (never READY). And a CSV left by deleting
// only its Subscription in a namespace where another operator's Subscription stays
// (CSVWithoutSubscription, by OLM's rule: no Subscription has it as status.installedCSV). Not reproduced here, and
// covered by envtest objects shaped as OLM and the kubelet write them (pkg/doctor): OOMKilled or
// crash-looping registry pods (kwok nodes run no containers), a bundle unpack past its deadline
// (the tier unpacks bundles on the host), a CSV stuck Installing, and an unavailable packageserver
// (the tier does not run packageserver).
func TestDoctorOLMFailures(t *testing.T) {
	declare(t, "doctor: OLM's failures", false)
	c, o := realOLM(t)
	ctx := context.Background()
	csvName := realolm.Beta.CSVName("1.0.0")

	// Set all three up, then wait for each: OLM works on them side by side.
	twoOGs := operatorNamespace(t, c, "doctor-ogs")
	subscribe(t, c, twoOGs, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	orphan := operatorNamespace(t, c, "doctor-orphan")
	first := subscribe(t, c, orphan, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	// A CSV left beside another operator's Subscription: beta's Subscription alone is deleted in
	// a namespace where alpha's stays.
	left := operatorNamespace(t, c, "doctor-left")
	alphaCSV := realolm.Alpha.CSVName("3.0.0")
	alpha := subscribe(t, c, left, "alpha", realolm.Alpha, v1alpha1.ApprovalAutomatic, alphaCSV)
	leftBeta := subscribe(t, c, left, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")
	catalogs := operatorNamespace(t, c, "doctor-catalog")
	// 192.0.2.0/24 is TEST-NET-1: nothing answers there.
	cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: catalogs, Name: "nowhere"},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: "192.0.2.1:50051", DisplayName: "nowhere"}}
	if err := c.Client.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}

	waitCSV(t, c, twoOGs, csvName)
	if err := c.Client.Create(ctx, &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: twoOGs, Name: "og-again"},
		Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{twoOGs}}}); err != nil {
		t.Fatal(err)
	}
	waitCSV(t, c, orphan, csvName)
	if err := c.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	again := subscribe(t, c, orphan, "beta-again", realolm.Beta, v1alpha1.ApprovalAutomatic, "")

	testenv.Eventually(t, "OLM fails "+csvName+" with TooManyOperatorGroups", func(ctx context.Context) (bool, error) {
		csv := &v1alpha1.ClusterServiceVersion{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: twoOGs, Name: csvName}, csv)
		return err == nil && csv.Status.Reason == v1alpha1.CSVReasonTooManyOperatorGroups, err
	})
	code, report := doctorReport(t, c, twoOGs)
	f := finding(t, report, "TooManyOperatorGroups", "og-again")
	if code != 1 || !strings.Contains(f.Evidence, "Failed, TooManyOperatorGroups") || !slices.Contains(f.Commands, "kubectl -n "+twoOGs+" delete operatorgroup og-again") {
		t.Errorf("two OperatorGroups on OLM %s: exit %d, %+v", o.Version, code, f)
	}
	t.Logf("OLM %s, two OperatorGroups: %s [%s] -> %s %q", o.Version, f.Problem, f.Evidence, f.Fix, f.Commands)

	if err := realolm.ResolutionFailed(ctx, c.Client, again, drift.ReasonConstraintsNotSatisfiable); err != nil {
		t.Fatal(err)
	}
	code, report = doctorReport(t, c, orphan)
	f = finding(t, report, "OrphanCSVBlocksResolution", csvName)
	if code != 1 || !strings.Contains(f.Evidence, "Subscription beta-again: ResolutionFailed=True, ConstraintsNotSatisfiable") {
		t.Errorf("orphan CSV on OLM %s: exit %d, %+v", o.Version, code, f)
	}
	t.Logf("OLM %s, orphan CSV: %s [%s] -> %s %q", o.Version, f.Problem, f.Evidence, f.Fix, f.Commands)
	// The fix doctor prints: delete the orphan, touch the Subscription; OLM then installs again.
	if err := c.Client.Delete(ctx, &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: orphan, Name: csvName}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the orphan "+csvName+" is gone", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: orphan, Name: csvName}, &v1alpha1.ClusterServiceVersion{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := realolm.Resync(ctx, c.Client, again); err != nil {
		t.Fatal(err)
	}
	waitCSV(t, c, orphan, csvName)
	if _, report = doctorReport(t, c, orphan); slices.ContainsFunc(report.Findings, func(f doctor.Finding) bool { return f.Check == "OrphanCSVBlocksResolution" }) {
		t.Errorf("after the fix, doctor still reports the orphan: %+v", report.Findings)
	}

	// OLM keeps alpha's CSV as its Subscription's status.installedCSV, and beta's as nobody's:
	// doctor reports beta's alone (it reported neither while a Subscription was left in the
	// namespace).
	waitCSV(t, c, left, csvName)
	waitCSV(t, c, left, alphaCSV)
	if err := realolm.SubscriptionInstalled(ctx, c.Client, alpha, alphaCSV); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Delete(ctx, leftBeta); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Subscription beta is gone", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(leftBeta), &v1alpha1.Subscription{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	code, report = doctorReport(t, c, left)
	f = finding(t, report, "CSVWithoutSubscription", csvName)
	if code != 1 || !slices.Contains(f.Commands, "kubectl -n "+left+" delete csv "+csvName) {
		t.Errorf("a CSV left beside another Subscription on OLM %s: exit %d, %+v", o.Version, code, f)
	}
	if slices.ContainsFunc(report.Findings, func(f doctor.Finding) bool { return f.Name == alphaCSV }) {
		t.Errorf("doctor reports %s, which Subscription alpha has installed: %+v", alphaCSV, report.Findings)
	}
	t.Logf("OLM %s, a CSV left beside another Subscription: %s -> %s %q", o.Version, f.Problem, f.Fix, f.Commands)

	// Waits for the catalog to be older than doctor's --pending-after=1s below (creation times
	// are whole seconds, hence 2 s): a minimum age to wait for, which no slow machine can miss.
	testenv.Eventually(t, "OLM observes catalog "+cs.Name+" not READY", func(ctx context.Context) (bool, error) {
		got := &v1alpha1.CatalogSource{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(cs), got); err != nil {
			return false, err
		}
		st := got.Status.ConnectionState
		return st != nil && st.LastObservedState != "" && st.LastObservedState != "READY" &&
			time.Since(got.CreationTimestamp.Time) > 2*time.Second, nil
	})
	code, report = doctorReport(t, c, catalogs, "--pending-after=1s")
	f = finding(t, report, "CatalogNotReady", cs.Name)
	if code != 1 || !strings.Contains(f.Evidence, "lastObservedState=") || !slices.Contains(f.Commands, "kubectl -n "+catalogs+" delete catalogsource nowhere") {
		t.Errorf("catalog pointing nowhere on OLM %s: exit %d, %+v", o.Version, code, f)
	}
	t.Logf("OLM %s, catalog pointing nowhere: %s [%s] -> %s %q", o.Version, f.Problem, f.Evidence, f.Fix, f.Commands)
	if code, report = doctorReport(t, c, catalogs); slices.ContainsFunc(report.Findings, func(f doctor.Finding) bool { return f.Check == "CatalogNotReady" }) {
		t.Errorf("within the default --pending-after (10m), doctor reports the new catalog: exit %d, %+v", code, report.Findings)
	}
	checkLogs(t, o)
}
