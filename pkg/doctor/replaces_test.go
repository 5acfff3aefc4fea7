package doctor

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

func replacingCSV(ns, name, replaces string, labels map[string]string) v1alpha1.ClusterServiceVersion {
	return v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: v1alpha1.ClusterServiceVersionSpec{Replaces: replaces}}
}

// The replaces-cycle check (OCPBUGS-23954): one finding per cycle of a namespace, with the chain
// and the label that makes olm-operator loop as evidence, the recovery as fix, and a command only
// for a valid name. Fails before the fix: doctor had no such check (and TrimCSV dropped
// spec.replaces).
func TestCheckReplacesCycles(t *testing.T) {
	co := map[string]string{olm.ClusterOperatorNameLabel: "operator-lifecycle-manager-packageserver"}
	hostile := "evil\x1b]0;pwned\x07.v1"
	for _, tc := range []struct {
		name     string
		csvs     []v1alpha1.ClusterServiceVersion
		want     string   // OLM:ReplacesCycle:ns/name, comma-separated
		evidence []string // in the findings' evidence, in order
		fix      []string // in the commands, in order
	}{
		{name: "none: an upgrade chain", csvs: []v1alpha1.ClusterServiceVersion{replacingCSV("ns", "a.v2", "a.v1", nil), replacingCSV("ns", "a.v1", "", nil)}},
		{name: "self-reference, labelled", csvs: []v1alpha1.ClusterServiceVersion{replacingCSV("ns", "s.v1", "s.v1", co)},
			want:     "OLM:ReplacesCycle:ns/s.v1",
			evidence: []string{"s.v1 replaces s.v1; labelled for ClusterOperator status, so olm-operator loops on them where it reports it: s.v1 (olm.clusteroperator.name=operator-lifecycle-manager-packageserver)"},
			fix:      []string{`kubectl -n ns patch csv s.v1 --type=json '-p=[{"op":"remove","path":"/spec/replaces"}]'`}},
		{name: "a cycle of two, unlabelled, beside a tail into it and a copy",
			csvs: []v1alpha1.ClusterServiceVersion{replacingCSV("ns", "b", "a", nil), replacingCSV("ns", "a", "b", nil), replacingCSV("ns", "t", "a", nil),
				replacingCSV("ns", "c", "c", map[string]string{olm.CopiedFromLabel: "ops"})},
			want:     "OLM:ReplacesCycle:ns/a",
			evidence: []string{"a replaces b, b replaces a; none labelled olm.clusteroperator.name"}},
		{name: "the same names in two namespaces are two namespaces",
			csvs: []v1alpha1.ClusterServiceVersion{replacingCSV("one", "a", "b", nil), replacingCSV("two", "b", "a", nil), replacingCSV("two", "x", "x", nil)},
			want: "OLM:ReplacesCycle:two/x"},
		{name: "a hostile name: reported, no command", csvs: []v1alpha1.ClusterServiceVersion{replacingCSV("ns", hostile, hostile, nil)},
			want: "OLM:ReplacesCycle:ns/" + hostile},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckReplacesCycles(tc.csvs)
			var names []string
			for _, f := range got {
				names = append(names, string(f.Class)+":"+f.Check+":"+f.Namespace+"/"+f.Name)
				if !strings.Contains(f.Problem, "OCPBUGS-23954") || !strings.Contains(f.Fix, "restart olm-operator") {
					t.Errorf("finding %+v: the problem cites no OCPBUGS-23954 or the fix no restart", f)
				}
			}
			if j := strings.Join(names, ","); j != tc.want {
				t.Fatalf("findings %q, want %q", j, tc.want)
			}
			for i, e := range tc.evidence {
				if !strings.Contains(got[i].Evidence, e) {
					t.Errorf("evidence %q, want %q", got[i].Evidence, e)
				}
			}
			for i, c := range tc.fix {
				if cmds := strings.Join(got[i].Commands, "\n"); !strings.Contains(cmds, c) {
					t.Errorf("commands %q, want %q", cmds, c)
				}
			}
			if strings.Contains(tc.want, hostile) {
				if len(got[0].Commands) != 0 || !strings.Contains(got[0].Fix, "no command printed") {
					t.Errorf("hostile name: commands %q, fix %q", got[0].Commands, got[0].Fix)
				}
				var out bytes.Buffer
				if err := WriteTable(&out, &Report{Findings: got}); err != nil {
					t.Fatal(err)
				}
				if strings.ContainsAny(out.String(), "\x1b\x07") {
					t.Errorf("table output carries the name's control characters: %q", out.String())
				}
			}
		})
	}
}
