package olmaudit_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/olmaudit"
	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/metrics"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, nil) }

func TestTally(t *testing.T) {
	f := func(class doctor.Class, check, ns, name string) doctor.Finding {
		return doctor.Finding{Class: class, Check: check, Namespace: ns, Name: name}
	}
	for _, tc := range []struct {
		name     string
		findings []doctor.Finding
		want     map[olmaudit.Key]int
	}{
		{"nothing found", nil, map[olmaudit.Key]int{}},
		{"one check on several objects, another once", []doctor.Finding{
			f(doctor.OLM, "CatalogNotReady", "a", "x"), f(doctor.OLM, "CatalogNotReady", "b", "y"), f(doctor.F3, "CSVStuckTerminating", "a", "z"),
		}, map[olmaudit.Key]int{{doctor.OLM, "CatalogNotReady"}: 2, {doctor.F3, "CSVStuckTerminating"}: 1}},
		{"the same check name in two classes stays apart", []doctor.Finding{
			f(doctor.F1, "Same", "a", "x"), f(doctor.OLM, "Same", "a", "x"),
		}, map[olmaudit.Key]int{{doctor.F1, "Same"}: 1, {doctor.OLM, "Same"}: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := olmaudit.Tally(tc.findings); !maps.Equal(got, tc.want) {
				t.Errorf("Tally = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	if err := olmaudit.DefaultOptions().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
	if err := (olmaudit.Options{Interval: 30 * time.Second}).Validate(); err == nil || err.Error() != "--audit-interval 30s must be at least 1m0s" {
		t.Errorf("30s: %v", err)
	}
}

// failingReader answers every read with an error, as an apiserver that is down would.
type failingReader struct{ client.Reader }

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("connection refused")
}

// TestRunOnceOnAPIServer: an audit through a real kube-apiserver sets olmguard_audit_findings to
// what doctor finds (two OperatorGroups in one namespace, a Subscription in a namespace without
// one), drops a finding's series once it is fixed, and leaves the last findings in place when an
// audit fails, counting the failure.
func TestRunOnceOnAPIServer(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	c := env.Client
	for _, ns := range []string{"audit-two-groups", "audit-no-group"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	second := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-two-groups", Name: "second"}}
	for _, o := range []client.Object{
		&olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-two-groups", Name: "first"}}, second,
		&v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-no-group", Name: "lonely"},
			Spec: v1alpha1.SubscriptionSpec{Package: "lonely", CatalogSource: "cat", CatalogSourceNamespace: "olm", Channel: "stable"}},
	} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	a := &olmaudit.Auditor{Reader: env.Client, Interval: time.Minute, Options: doctor.DefaultOptions()}
	runs := func(result string) float64 { return testutil.ToFloat64(metrics.AuditRuns.WithLabelValues(result)) }
	findings := func(check string) float64 {
		return testutil.ToFloat64(metrics.AuditFindings.WithLabelValues(string(doctor.OLM), check))
	}
	successes := runs("success")
	if err := a.RunOnce(ctx, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if got := findings("TooManyOperatorGroups"); got != 1 {
		t.Errorf("TooManyOperatorGroups = %v, want 1", got)
	}
	if got := findings("NoOperatorGroup"); got != 1 {
		t.Errorf("NoOperatorGroup = %v, want 1", got)
	}
	if got := runs("success"); got != successes+1 {
		t.Errorf("successful runs %v, want %v", got, successes+1)
	}
	if last := testutil.ToFloat64(metrics.AuditLastSuccess); time.Since(time.Unix(int64(last), 0)) > time.Hour {
		t.Errorf("last success %v: not set", last)
	}

	// Fixed: the next audit no longer exports the check (Reset drops its series).
	if err := c.Delete(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := a.RunOnce(ctx, logr.Discard()); err != nil {
		t.Fatal(err)
	}
	if metrics.AuditFindings.DeleteLabelValues(string(doctor.OLM), "TooManyOperatorGroups") {
		t.Error("TooManyOperatorGroups still exported after the fix")
	}
	if got := findings("NoOperatorGroup"); got != 1 {
		t.Errorf("NoOperatorGroup = %v, want 1", got)
	}

	// A failed audit keeps the last findings: an apiserver outage must not clear the alerts.
	errorsBefore := runs("error")
	failing := &olmaudit.Auditor{Reader: failingReader{}, Interval: time.Minute, Options: doctor.DefaultOptions()}
	if err := failing.RunOnce(ctx, logr.Discard()); err == nil {
		t.Fatal("an audit whose lists fail succeeded")
	}
	if got := runs("error"); got != errorsBefore+1 {
		t.Errorf("failed runs %v, want %v", got, errorsBefore+1)
	}
	if got := findings("NoOperatorGroup"); got != 1 {
		t.Errorf("NoOperatorGroup = %v after a failed audit, want the last value 1", got)
	}
}

// TestRunsInTheControllerManager: the olm-audit reconciler of the controller's default setup
// audits once it leads, without waiting an interval, and exports its interval.
func TestRunsInTheControllerManager(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "audit-manager"}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		if err := env.Client.Create(ctx, &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "audit-manager", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	before := testutil.ToFloat64(metrics.AuditRuns.WithLabelValues("success"))
	o := setup.DefaultController().OLMAudit
	o.Interval = time.Hour // the first audit must not wait for it
	stop, err := testenv.RunManager(env.Config, testenv.ManagerOptions(), setup.Controller{OLMAudit: o}.Reconciler(olmaudit.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	testenv.Eventually(t, "the first audit", func(context.Context) (bool, error) {
		return testutil.ToFloat64(metrics.AuditRuns.WithLabelValues("success")) > before, nil
	})
	if got := testutil.ToFloat64(metrics.AuditFindings.WithLabelValues(string(doctor.OLM), "TooManyOperatorGroups")); got < 1 {
		t.Errorf("TooManyOperatorGroups = %v, want at least 1", got)
	}
	if got := testutil.ToFloat64(metrics.AuditInterval); got != time.Hour.Seconds() {
		t.Errorf("olmguard_audit_interval_seconds = %v, want %v", got, time.Hour.Seconds())
	}
}
