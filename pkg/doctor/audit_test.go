package doctor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, nil) }

// Through a real apiserver: an empty cluster is healthy; lists longer than a page report
// progress; kinds the caller may not read are skipped, not silently passed.
func TestAudit(t *testing.T) {
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	opts := doctor.DefaultOptions()

	r, err := doctor.Audit(ctx, env.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Findings) != 0 || len(r.Skipped) != 0 {
		t.Fatalf("empty cluster: findings %v, skipped %v", r.Findings, r.Skipped)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doctor-pages"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		sub := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: fmt.Sprintf("s%d", i)},
			Spec: v1alpha1.SubscriptionSpec{Package: "p", CatalogSource: "c", CatalogSourceNamespace: "olm"}}
		if err := env.Client.Create(ctx, sub); err != nil {
			t.Fatal(err)
		}
	}
	var progress strings.Builder
	opts.PageSize, opts.CSVPageSize, opts.SubscriptionPageSize, opts.Progress, opts.Namespace = 2, 0, 0, &progress, ns.Name
	if r, err = doctor.Audit(ctx, env.Client, opts); err != nil {
		t.Fatal(err)
	}
	if r.Checked["Subscriptions"] != 3 || !strings.Contains(progress.String(), "Subscriptions: 2 read...") ||
		!strings.Contains(progress.String(), "Subscriptions: 3 read") {
		t.Errorf("checked %v, progress:\n%s", r.Checked, progress.String())
	}

	// OLM's copies of a CSV in its target namespaces are left out of the list when asked (the
	// controller's periodic audit): no check reports them.
	for name, labels := range map[string]map[string]string{"op.v1": nil, "op.v1-copy": {olm.CopiedFromLabel: "elsewhere"}} {
		csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name, Labels: labels},
			Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}}}
		if err := env.Client.Create(ctx, csv); err != nil {
			t.Fatal(err)
		}
	}
	for skip, want := range map[bool]int{false: 2, true: 1} {
		o := opts
		o.SkipCopiedCSVs = skip
		if r, err = doctor.Audit(ctx, env.Client, o); err != nil {
			t.Fatal(err)
		}
		if got := r.Checked["ClusterServiceVersions"]; got != want {
			t.Errorf("SkipCopiedCSVs=%v: %d CSVs read, want %d", skip, got, want)
		}
	}

	// CSVs have their own page size: pages of one CSV while other kinds are read whole.
	progress.Reset()
	o := opts
	o.PageSize, o.CSVPageSize = 500, 1
	if r, err = doctor.Audit(ctx, env.Client, o); err != nil {
		t.Fatal(err)
	}
	if p := progress.String(); r.Checked["ClusterServiceVersions"] != 2 || !strings.Contains(p, "ClusterServiceVersions: 1 read...") ||
		!strings.Contains(p, "ClusterServiceVersions: 2 read") || strings.Contains(p, "Subscriptions") {
		t.Errorf("CSVPageSize 1, PageSize 500: checked %v, progress:\n%s", r.Checked, p)
	}

	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	nobody, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	r, err = doctor.Audit(ctx, nobody, doctor.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Skipped) != 9 || !strings.Contains(strings.Join(r.Skipped, "\n"), "F5 checks: cannot list Nodes") ||
		!strings.Contains(strings.Join(r.Skipped, "\n"), "OLM checks: cannot get APIService v1.packages.operators.coreos.com") {
		t.Errorf("without RBAC, every kind must be skipped: %q", r.Skipped)
	}
}
