package hostile

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// TestDiff: the snapshot comparison reports deletions, replacements and changes of what an object
// says, ignores its status and volatile annotations, and excuses only what an allowFunc names.
func TestDiff(t *testing.T) {
	cr := schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
	obj := func(uid string, mutate func(*unstructured.Unstructured)) record {
		u := &unstructured.Unstructured{Object: map[string]any{"rules": []any{"a"}, "status": map[string]any{"x": 1}}}
		u.SetUID(types.UID("uid-" + uid))
		u.SetLabels(map[string]string{"l": "1"})
		u.SetAnnotations(map[string]string{"a": "1", "deployment.kubernetes.io/revision": "1"})
		if mutate != nil {
			mutate(u)
		}
		return recordOf(u)
	}
	k := key{cr, "", "role"}
	base := snapshot{k: obj("1", nil)}
	for name, tc := range map[string]struct {
		after snapshot
		allow []allowFunc
		want  string
	}{
		"unchanged":         {snapshot{k: obj("1", nil)}, nil, ""},
		"status only":       {snapshot{k: obj("1", func(u *unstructured.Unstructured) { u.Object["status"] = "y" })}, nil, ""},
		"volatile only":     {snapshot{k: obj("1", func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "1"}) })}, nil, ""},
		"deleted":           {snapshot{}, nil, "clusterroles.rbac.authorization.k8s.io/role: deleted"},
		"replaced":          {snapshot{k: obj("2", nil)}, nil, "replaced"},
		"rules":             {snapshot{k: obj("1", func(u *unstructured.Unstructured) { u.Object["rules"] = []any{"b"} })}, nil, "content"},
		"labels":            {snapshot{k: obj("1", func(u *unstructured.Unstructured) { u.SetLabels(nil) })}, nil, "labels"},
		"finalizers":        {snapshot{k: obj("1", func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"f"}) })}, nil, "finalizers"},
		"ownership relabel": {snapshot{k: obj("1", func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"l": "1", "olm.owner": "x.v2"}) })}, nil, ""},
		"created is fine":   {snapshot{k: obj("1", nil), key{cr, "", "new"}: obj("3", nil)}, nil, ""},
		"allowed":           {snapshot{}, []allowFunc{func(key, record, *record) (string, bool) { return "expected", true }}, ""},
	} {
		got := strings.Join(diff(base, tc.after, tc.allow...), "\n")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: diff %q, want %q", name, got, tc.want)
		}
	}
}
