package doctor_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/doctor"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// Through a real apiserver: an operator installed for all namespaces is counted as copied into
// every other namespace, from the namespaces' count alone (no copy is read), and reported above
// the threshold; a namespace-scoped audit and a threshold of 0 leave the check out.
func TestAuditCountsCopiedCSVs(t *testing.T) {
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	ns := testenv.FreshNamespace(t, env.Client, "copies-operators")
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "global"}}
	csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "wide.v1"},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: "wide", InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}}}
	if err := env.Client.Create(ctx, og); err != nil {
		t.Fatal(err)
	}
	og.Status = olmv1.OperatorGroupStatus{Namespaces: []string{metav1.NamespaceAll}, LastUpdated: metav1.Now()}
	if err := env.Client.Status().Update(ctx, og); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, csv); err != nil {
		t.Fatal(err)
	}
	// Later audits of the shared apiserver must not see them.
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), csv)
		_ = env.Client.Delete(context.Background(), og)
	})
	namespaces := &corev1.NamespaceList{}
	if err := env.Client.List(ctx, namespaces); err != nil {
		t.Fatal(err)
	}

	find := func(o doctor.Options) *doctor.Finding {
		t.Helper()
		r, err := doctor.Audit(ctx, env.Client, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Findings {
			if r.Findings[i].Check == "CopiedCSVsMultiply" {
				return &r.Findings[i]
			}
		}
		return nil
	}
	o := doctor.DefaultOptions()
	o.CopiedCSVsAbove = 1
	f := find(o)
	if f == nil {
		t.Fatal("no CopiedCSVsMultiply finding for an operator installed for all namespaces")
	}
	if !strings.Contains(f.Evidence, ns+"/wide.v1") || !strings.Contains(f.Problem, "each copied into") {
		t.Errorf("finding %+v", f)
	}
	if len(namespaces.Items) < 3 {
		t.Fatalf("%d namespaces: too few for the threshold of 1", len(namespaces.Items))
	}
	o.Namespace = ns
	if f := find(o); f != nil {
		t.Errorf("a namespace-scoped audit counted the cluster's copies: %+v", f)
	}
	o.Namespace, o.CopiedCSVsAbove = "", 0
	if f := find(o); f != nil {
		t.Errorf("CopiedCSVsAbove 0 must leave the check out: %+v", f)
	}
}
