package admit

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// getRecorder counts the GETs it passes on.
type getRecorder struct {
	client.Reader
	keys []client.ObjectKey
}

func (g *getRecorder) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	g.keys = append(g.keys, key)
	return g.Reader.Get(ctx, key, obj, opts...)
}

// The replaces-cycle guard's read: a CSV's spec.replaces; a copy (any of OLM's three marks) or a
// missing CSV is not found; a name no CSV can have is never sent to the apiserver; only the asked
// namespace is read.
func TestLiveCSVReplaces(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	csv := func(name string, labels, annotations map[string]string, reason v1alpha1.ConditionReason) *v1alpha1.ClusterServiceVersion {
		return &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels, Annotations: annotations},
			Spec: v1alpha1.ClusterServiceVersionSpec{Replaces: name + "-prev"}, Status: v1alpha1.ClusterServiceVersionStatus{Reason: reason}}
	}
	r := &getRecorder{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(
		csv("own", nil, nil, ""),
		csv("labelled-copy", map[string]string{olm.CopiedFromLabel: "ops"}, nil, ""),
		csv("annotated-copy", nil, map[string]string{olm.OperatorNamespaceAnnotation: "ops"}, ""),
		csv("reason-copy", nil, nil, v1alpha1.CSVReasonCopied),
	).Build()}
	l := LiveCSVReplaces{Reader: r}
	for _, tc := range []struct {
		name, want string
		found, get bool
	}{
		{"own", "own-prev", true, true},
		{"labelled-copy", "", false, true},
		{"annotated-copy", "", false, true},
		{"reason-copy", "", false, true},
		{"missing", "", false, true},
		{"../secrets/x", "", false, false},
		{"UPPER", "", false, false},
		{strings.Repeat("a", 254), "", false, false},
		{"", "", false, false},
	} {
		r.keys = nil
		got, found, err := l.Replaces(context.Background(), "ns", tc.name)
		if err != nil || got != tc.want || found != tc.found {
			t.Errorf("Replaces(%.20q) = %q, %v, %v; want %q, %v", tc.name, got, found, err, tc.want, tc.found)
		}
		if (len(r.keys) == 1) != tc.get || len(r.keys) == 1 && r.keys[0].Namespace != "ns" {
			t.Errorf("Replaces(%.20q): GETs %v, want one in ns: %v", tc.name, r.keys, tc.get)
		}
	}
}
