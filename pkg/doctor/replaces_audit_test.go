package doctor_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// Audit lists CSVs through a real apiserver and still sees their spec.replaces (TrimCSV keeps
// it): a labelled self-replacing CSV is reported as ReplacesCycle, its upgrade-chain neighbour
// is not. Fails before the fix: no such check, and the listed CSVs lost their spec.
func TestAuditReplacesCycle(t *testing.T) {
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "doctor-replaces"}}
	if err := env.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	for name, replaces := range map[string]string{"loop.v1": "loop.v1", "op.v2": "op.v1", "op.v1": ""} {
		csv := &v1alpha1.ClusterServiceVersion{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name, Labels: map[string]string{olm.ClusterOperatorNameLabel: "x"}},
			Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, Replaces: replaces,
				InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}}}
		if err := env.Client.Create(ctx, csv); err != nil {
			t.Fatal(err)
		}
	}
	opts := doctor.DefaultOptions()
	opts.Namespace = ns.Name
	r, err := doctor.Audit(ctx, env.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range r.Findings {
		if f.Check == "ReplacesCycle" {
			got = append(got, f.Namespace+"/"+f.Name)
		}
	}
	if len(got) != 1 || got[0] != ns.Name+"/loop.v1" {
		t.Fatalf("ReplacesCycle findings %v, want only %s/loop.v1 (all: %+v)", got, ns.Name, r.Findings)
	}
}
