package cacheneeds_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/cacheneeds"
)

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

var (
	keepAll  = cacheneeds.Fields{Name: "all", Trim: func(o client.Object) client.Object { return o }}
	specOnly = cacheneeds.Fields{Name: "spec", Trim: func(o client.Object) client.Object { return o }}
)

// Two reconcilers declaring one kind differently stop the controller at start, with both named.
// Fails before the fix: the manager took the last declaration and the first reconciler read a
// cache that did not hold what it declared.
func TestMergeRefusesConflicts(t *testing.T) {
	catalog := labels.SelectorFromSet(labels.Set{"olm.catalogSource": "x"})
	other := labels.SelectorFromSet(labels.Set{"app": "y"})
	for _, tc := range []struct {
		name string
		a, b cacheneeds.Kind
		want []string // in the error; nil: no error
	}{
		{"other label selectors", cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog}, cacheneeds.Kind{Object: &corev1.Pod{}, Label: other},
			[]string{`"first"`, `"second"`, "Pod", "olm.catalogSource=x", "app=y"}},
		{"a selector and none", cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog}, cacheneeds.Kind{Object: &corev1.Pod{}},
			[]string{`"first"`, `"second"`, "every object"}},
		{"other field sets", cacheneeds.Kind{Object: &corev1.Pod{}, Fields: keepAll}, cacheneeds.Kind{Object: &corev1.Pod{}, Fields: specOnly},
			[]string{`"first"`, `"second"`, `"all"`, `"spec"`}},
		{"metadata only within a field set", cacheneeds.Kind{Object: &corev1.Pod{}, Fields: keepAll}, cacheneeds.Kind{Object: &corev1.Pod{}}, nil},
		{"the same selector twice", cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog}, cacheneeds.Kind{Object: &corev1.Pod{}, Label: labels.SelectorFromSet(labels.Set{"olm.catalogSource": "x"})}, nil},
		{"other kinds", cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog}, cacheneeds.Kind{Object: &corev1.Node{}, Label: other}, nil},
		{"a second selection and none", cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog, Also: other}, cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog},
			[]string{`"first"`, `"second"`, "also labels", "app=y"}},
		{"the same second selection twice", cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog, Also: other}, cacheneeds.Kind{Object: &corev1.Pod{}, Label: catalog, Also: other}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cacheneeds.Merge(scheme(t), []cacheneeds.Declared{{Reconciler: "first", Needs: cacheneeds.Needs{tc.a}}, {Reconciler: "second", Needs: cacheneeds.Needs{tc.b}}})
			if tc.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("conflicting declarations were merged")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %s", err, w)
				}
			}
		})
	}
}

// The merged transform keeps the declared label and annotation keys of every reconciler, drops
// the rest and managed fields, and trims to the declared fields, or to metadata when none is.
func TestMergedTransform(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"zone": "a", "role": "b", "prefix.io/x": "c"},
		Annotations: map[string]string{"big": "x", "read": "y"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24"}}
	also := labels.SelectorFromSet(labels.Set{"role": "b"})
	merged, err := cacheneeds.Merge(scheme(t), []cacheneeds.Declared{
		{Reconciler: "a", Needs: cacheneeds.Needs{{Object: &corev1.Node{}, Labels: []string{"zone"}, Also: also}}},
		{Reconciler: "b", Needs: cacheneeds.Needs{{Object: &corev1.Node{}, Labels: []string{"prefix.io/"}, Annotations: []string{"read"}, Also: also}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(merged.ByObject) != 1 || len(merged.Also) != 1 {
		t.Fatalf("%d kinds configured, %d with a second selection: want 1 and 1", len(merged.ByObject), len(merged.Also))
	}
	for _, by := range merged.Also {
		if by.Label.String() != also.String() {
			t.Errorf("second selection %q, want %q", by.Label, also)
		}
	}
	// Both selections are trimmed alike.
	for _, by := range []cache.ByObject{slices.Collect(maps.Values(merged.ByObject))[0], slices.Collect(maps.Values(merged.Also))[0]} {
		out, err := by.Transform(node)
		if err != nil {
			t.Fatal(err)
		}
		n := out.(*corev1.Node)
		if len(n.Labels) != 2 || n.Labels["zone"] != "a" || n.Labels["prefix.io/x"] != "c" || len(n.Annotations) != 1 || n.Annotations["read"] != "y" {
			t.Errorf("labels %v, annotations %v: want zone and prefix.io/x, and read", n.Labels, n.Annotations)
		}
		if n.ManagedFields != nil || n.Spec.PodCIDR != "" || n.Name != "n" {
			t.Errorf("metadata only wanted, got %+v", n)
		}
	}
}

// TestTransformSharesRepeatedStrings: two objects decoded apart hold one copy of their namespace
// and of their ownerReferences' apiVersion and kind, and the references take no spare capacity.
// Fails without shareStrings: every decoded string is an allocation of its own (200,000
// references on 20,000 InstallPlans of a 2,000-namespace cluster).
func TestTransformSharesRepeatedStrings(t *testing.T) {
	tr := cacheneeds.Transform(nil, nil, nil)
	decoded := func() *corev1.ConfigMap {
		// Fresh strings each time, as a decoder makes them; refs with spare capacity, as a
		// decoder's growing slice leaves them.
		fresh := func(s string) string { return string([]byte(s)) }
		refs := make([]metav1.OwnerReference, 0, 16)
		for i := range 10 {
			refs = append(refs, metav1.OwnerReference{APIVersion: fresh("operators.coreos.com/v1alpha1"), Kind: fresh("Subscription"),
				Name: fresh("sub-" + string(rune('a'+i))), UID: "u"})
		}
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: fresh("team-a"), Name: "x", OwnerReferences: refs}}
	}
	var out []*corev1.ConfigMap
	for range 2 {
		o, err := tr(decoded())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*corev1.ConfigMap))
	}
	a, b := out[0], out[1]
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("two objects of one namespace hold two copies of its name")
	}
	for i := range a.OwnerReferences {
		ra, rb := a.OwnerReferences[i], b.OwnerReferences[i]
		if unsafe.StringData(ra.APIVersion) != unsafe.StringData(rb.APIVersion) || unsafe.StringData(ra.Kind) != unsafe.StringData(rb.Kind) {
			t.Fatalf("ownerReference %d: apiVersion and kind not shared", i)
		}
		if ra.Name != rb.Name || ra.APIVersion != "operators.coreos.com/v1alpha1" || ra.Kind != "Subscription" {
			t.Fatalf("ownerReference %d changed: %+v", i, ra)
		}
	}
	if cap(a.OwnerReferences) != len(a.OwnerReferences) {
		t.Errorf("ownerReferences: capacity %d for %d", cap(a.OwnerReferences), len(a.OwnerReferences))
	}
}

// TestTransformSharesRepeatedValues: the ten InstallPlans of a namespace, all owned by the same
// Subscriptions, hold one list of references between them, and the copies of one operator one
// labels map and one annotations map. Fails without ShareOwnerReferences and ShareMap: each
// object holds its own (on a cluster of 2,000 namespaces, 200,000 references and 40,000 maps).
func TestTransformSharesRepeatedValues(t *testing.T) {
	tr := cacheneeds.Transform([]string{"olm.copiedFrom"}, []string{"olm.operatorNamespace"}, nil)
	fresh := func(s string) string { return string([]byte(s)) }
	decoded := func(name string) *corev1.ConfigMap {
		var refs []metav1.OwnerReference
		for i := range 10 {
			refs = append(refs, metav1.OwnerReference{APIVersion: fresh("operators.coreos.com/v1alpha1"), Kind: fresh("Subscription"),
				Name: fresh("sub-" + string(rune('a'+i))), UID: types.UID(fresh("uid-" + string(rune('a'+i))))})
		}
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: name, OwnerReferences: refs,
			Labels:      map[string]string{"olm.copiedFrom": fresh("operators"), "dropped": "x"},
			Annotations: map[string]string{"olm.operatorNamespace": fresh("operators"), "alm-examples": "[]"}}}
	}
	var out []*corev1.ConfigMap
	for _, name := range []string{"plan-1", "plan-2"} {
		o, err := tr(decoded(name))
		if err != nil {
			t.Fatal(err)
		}
		// The informer runs the transform a second time on what the page's transform returned.
		if o, err = tr(o); err != nil {
			t.Fatal(err)
		}
		out = append(out, o.(*corev1.ConfigMap))
	}
	a, b := out[0], out[1]
	if &a.OwnerReferences[0] != &b.OwnerReferences[0] {
		t.Error("two objects with the same owners hold two lists of references")
	}
	if reflect.ValueOf(a.Labels).Pointer() != reflect.ValueOf(b.Labels).Pointer() ||
		reflect.ValueOf(a.Annotations).Pointer() != reflect.ValueOf(b.Annotations).Pointer() {
		t.Error("two objects with the same labels and annotations hold a map each")
	}
	if a.Name != "plan-1" || b.Name != "plan-2" || len(a.OwnerReferences) != 10 || a.OwnerReferences[9].Name != "sub-j" ||
		!reflect.DeepEqual(a.Labels, map[string]string{"olm.copiedFrom": "operators"}) ||
		!reflect.DeepEqual(a.Annotations, map[string]string{"olm.operatorNamespace": "operators"}) {
		t.Fatalf("shared values changed the objects: %+v", a.ObjectMeta)
	}
	// Other owners, other list.
	c := decoded("plan-3")
	c.OwnerReferences[0].UID = "other"
	o, err := tr(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.(*corev1.ConfigMap).OwnerReferences; &got[0] == &a.OwnerReferences[0] || got[0].UID != "other" {
		t.Errorf("a plan with other owners got the shared list: %+v", got[0])
	}
}

// Keep allocates nothing when every entry is kept: the transform's second pass over each listed
// object. Fails without the check: a new map per object and pass.
func TestKeepReusesAMapItKeepsWhole(t *testing.T) {
	m := map[string]string{"olm.copiedFrom": "operators", "olmguard.io/x": "1"}
	keys := []string{"olm.copiedFrom", "olmguard.io/"}
	if allocs := testing.AllocsPerRun(100, func() { cacheneeds.Keep(m, keys) }); allocs != 0 {
		t.Errorf("Keep of a map kept whole: %v allocations", allocs)
	}
	if got := cacheneeds.Keep(m, []string{"olm.copiedFrom"}); !reflect.DeepEqual(got, map[string]string{"olm.copiedFrom": "operators"}) {
		t.Errorf("Keep = %v", got)
	}
	if got := cacheneeds.Keep(m, []string{"other"}); got != nil {
		t.Errorf("Keep of nothing = %v, want nil", got)
	}
}
