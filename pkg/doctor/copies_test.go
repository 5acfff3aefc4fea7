package doctor

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

func TestCopySources(t *testing.T) {
	og := func(ns string, targets ...string) olmv1.OperatorGroup {
		return olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "og"}, Status: olmv1.OperatorGroupStatus{Namespaces: targets}}
	}
	csv := func(ns, name string, mutate ...func(*v1alpha1.ClusterServiceVersion)) v1alpha1.ClusterServiceVersion {
		c := v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		for _, m := range mutate {
			m(&c)
		}
		return c
	}
	now := metav1.NewTime(time.Now())
	ogs := []olmv1.OperatorGroup{og("global", ""), og("own", "own"), og("two", ""), og("two", "two")}
	csvs := []v1alpha1.ClusterServiceVersion{
		csv("global", "b.v1"), csv("global", "a.v1"),
		csv("global", "gone.v1", func(c *v1alpha1.ClusterServiceVersion) { c.DeletionTimestamp = &now }),
		csv("global", "copy.v1", func(c *v1alpha1.ClusterServiceVersion) { c.Status.Reason = olm.CopiedReason }),
		csv("own", "own.v1"),          // OwnNamespace: no copies
		csv("two", "ambiguous.v1"),    // two OperatorGroups: OLM installs nothing there
		csv("no-group", "nogroup.v1"), // no OperatorGroup
	}
	got := CopySources(csvs, ogs, 2000)
	want := []CopySource{{"global", "a.v1", 1999}, {"global", "b.v1", 1999}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("source %d = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestCheckCopiedCSVs(t *testing.T) {
	sources := make([]CopySource, 10)
	for i := range sources {
		sources[i] = CopySource{Namespace: "operators", Name: "op" + string(rune('a'+i)) + ".v1", Copies: 1999}
	}
	tests := []struct {
		name        string
		sources     []CopySource
		cfg         CopiedCSVs
		wantFinding bool
		wantCommand bool
	}{
		{"ten operators in 2,000 namespaces, no OLMConfig", sources, CopiedCSVs{Namespaces: 2000}, true, false},
		{"ten operators in 2,000 namespaces, OLMConfig with copies on", sources, CopiedCSVs{Namespaces: 2000, OLMConfigFound: true}, true, true},
		{"copies turned off", sources, CopiedCSVs{Namespaces: 2000, OLMConfigFound: true, Disabled: true}, false, false},
		{"at the threshold: the feature working as meant", []CopySource{{"operators", "op.v1", DefaultCopiedCSVsAbove}}, CopiedCSVs{Namespaces: DefaultCopiedCSVsAbove + 1}, false, false},
		{"none", nil, CopiedCSVs{Namespaces: 5}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckCopiedCSVs(tt.sources, tt.cfg, DefaultCopiedCSVsAbove)
			if (len(got) == 1) != tt.wantFinding || len(got) > 1 {
				t.Fatalf("findings %v, want one: %t", got, tt.wantFinding)
			}
			if !tt.wantFinding {
				return
			}
			f := got[0]
			if f.Check != "CopiedCSVsMultiply" || !strings.Contains(f.Problem, "about 19990 copied CSVs") || !strings.Contains(f.Evidence, "and 5 more") {
				t.Errorf("finding %+v", f)
			}
			if (len(f.Commands) == 1) != tt.wantCommand {
				t.Errorf("commands %v, want one: %t", f.Commands, tt.wantCommand)
			}
			if tt.wantCommand && !strings.Contains(f.Commands[0], "disableCopiedCSVs") {
				t.Errorf("command %q", f.Commands[0])
			}
		})
	}
}
