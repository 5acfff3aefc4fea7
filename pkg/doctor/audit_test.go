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
	opts.PageSize, opts.Progress, opts.Namespace = 2, &progress, ns.Name
	if r, err = doctor.Audit(ctx, env.Client, opts); err != nil {
		t.Fatal(err)
	}
	if r.Checked["Subscriptions"] != 3 || !strings.Contains(progress.String(), "Subscriptions: 2 read...") ||
		!strings.Contains(progress.String(), "Subscriptions: 3 read") {
		t.Errorf("checked %v, progress:\n%s", r.Checked, progress.String())
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
