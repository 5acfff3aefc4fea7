package serviceaccounts

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const irsa = "eks.amazonaws.com/role-arn"

// apply applies r's patch to the ServiceAccount v describes and reads the result back.
func apply(t *testing.T, v View, r Restore) View {
	t.Helper()
	sa := corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: "ns", Labels: v.Labels, Annotations: v.Annotations,
		OwnerReferences: v.OwnerReferences}, ImagePullSecrets: v.ImagePullSecrets, AutomountServiceAccountToken: v.AutomountToken}
	doc, err := json.Marshal(sa)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := json.Marshal(r.Patch)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("patch %s: %v", ops, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("applying %s to %s: %v", ops, doc, err)
	}
	var got corev1.ServiceAccount
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	return View{Labels: got.Labels, Annotations: got.Annotations, OwnerReferences: got.OwnerReferences, ImagePullSecrets: got.ImagePullSecrets,
		AutomountToken: got.AutomountServiceAccountToken}
}

func secrets(names ...string) []corev1.LocalObjectReference {
	out := make([]corev1.LocalObjectReference, len(names))
	for i, n := range names {
		out[i].Name = n
	}
	return out
}

func TestRestorePatch(t *testing.T) {
	csvOwner := []metav1.OwnerReference{{APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion", Name: "op.v2", UID: "u2"}}
	tests := []struct {
		name     string
		old, new View
		want     View // new with the patch applied
	}{
		{"OLM before v0.33 wipes every annotation (#3607)",
			View{Labels: map[string]string{"olm.managed": "true"}, Annotations: map[string]string{irsa: "arn:aws:iam::1:role/op", "team": "a"}},
			View{Labels: map[string]string{"olm.managed": "true"}, OwnerReferences: csvOwner},
			View{Labels: map[string]string{"olm.managed": "true"}, Annotations: map[string]string{irsa: "arn:aws:iam::1:role/op", "team": "a"}, OwnerReferences: csvOwner}},
		{"v0.46.0 drops extra labels, pull secrets and automount",
			View{Labels: map[string]string{"olm.managed": "true", "app": "op", "a/b~c": "1"}, ImagePullSecrets: secrets("reg", "mirror"), AutomountToken: ptr.To(false)},
			View{Labels: map[string]string{"olm.managed": "true"}, ImagePullSecrets: secrets("mirror")},
			View{Labels: map[string]string{"olm.managed": "true", "app": "op", "a/b~c": "1"}, ImagePullSecrets: secrets("mirror", "reg"), AutomountToken: ptr.To(false)}},
		{"pull secrets put back when OLM sent none",
			View{ImagePullSecrets: secrets("reg", "", "reg")},
			View{},
			View{ImagePullSecrets: secrets("reg")}},
		{"the new object's values win",
			View{Annotations: map[string]string{irsa: "old", "keep": "x"}, AutomountToken: ptr.To(false)},
			View{Annotations: map[string]string{irsa: "new"}, AutomountToken: ptr.To(true)},
			View{Annotations: map[string]string{irsa: "new", "keep": "x"}, AutomountToken: ptr.To(true)}},
		{"OLM's keys stay as OLM wrote them",
			View{Labels: map[string]string{"olm.owner": "x", "operators.coreos.com/op.ns": "", "olm.managed": "true"},
				Annotations: map[string]string{"olm.targetNamespaces": "a", "operators.coreos.com/x": "y"}},
			View{},
			View{}},
		{"nothing dropped", View{Annotations: map[string]string{"a": "b"}}, View{Annotations: map[string]string{"a": "b", "c": "d"}},
			View{Annotations: map[string]string{"a": "b", "c": "d"}}},
		{"empty maps on the new object",
			View{Annotations: map[string]string{"a": "1"}, Labels: map[string]string{"b": "2"}},
			View{Annotations: map[string]string{}, Labels: map[string]string{}},
			View{Annotations: map[string]string{"a": "1"}, Labels: map[string]string{"b": "2"}}},
		{"keys with control characters and pointer syntax",
			View{Annotations: map[string]string{"x/\x00\x1b[31m~1": "\u2028\x07", "~": "", "/": "/"}},
			View{Annotations: map[string]string{"other": "1"}},
			View{Annotations: map[string]string{"x/\x00\x1b[31m~1": "\u2028\x07", "~": "", "/": "/", "other": "1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := RestorePatch(tt.old, tt.new)
			got := apply(t, tt.new, r)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("restored = %+v\nwant %+v\npatch %v", got, tt.want, r.Patch)
			}
			if r.Capped {
				t.Errorf("capped")
			}
			if again := RestorePatch(tt.old, got); !again.Empty() {
				t.Errorf("not idempotent: %v", again.Patch)
			}
		})
	}
}

// A tenant's ServiceAccount with huge maps costs the restore no more than its limits: it puts back
// the first keys in sorted order and says it stopped.
func TestRestorePatchIsBounded(t *testing.T) {
	old := View{Annotations: map[string]string{}, Labels: map[string]string{}}
	for i := range 5000 {
		old.Annotations[fmt.Sprintf("a%05d", i)] = "v"
		old.Labels[fmt.Sprintf("l%05d", i)] = "v"
		old.ImagePullSecrets = append(old.ImagePullSecrets, corev1.LocalObjectReference{Name: fmt.Sprintf("s%d", i)})
	}
	r := RestorePatch(old, View{Annotations: map[string]string{}})
	if !r.Capped || len(r.Annotations) != MaxKeys || len(r.Labels) != MaxKeys || len(r.PullSecrets) != MaxPullSecrets {
		t.Fatalf("capped=%v, %d annotations, %d labels, %d pull secrets", r.Capped, len(r.Annotations), len(r.Labels), len(r.PullSecrets))
	}
	if r.Annotations[0] != "a00000" || r.Annotations[MaxKeys-1] != fmt.Sprintf("a%05d", MaxKeys-1) {
		t.Errorf("not the first keys in order: %v", r.Annotations)
	}

	big := View{Annotations: map[string]string{"a": strings.Repeat("x", MaxAnnotationBytes), "b": "small", "c": "next"}}
	r = RestorePatch(big, View{})
	if !r.Capped || len(r.Annotations) != 0 {
		t.Fatalf("one annotation over the byte limit: capped=%v, restored %v", r.Capped, r.Annotations)
	}
	big.Annotations["a"] = strings.Repeat("x", MaxAnnotationBytes-8) // a and b fit (65,535 bytes), c does not
	if r = RestorePatch(big, View{}); !r.Capped || !reflect.DeepEqual(r.Annotations, []string{"a", "b"}) {
		t.Fatalf("restored %v (capped %v), want a and b", r.Annotations, r.Capped)
	}
}

func TestStepWrite(t *testing.T) {
	csv := metav1.OwnerReference{APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion", Name: "x", UID: "u"}
	catalog := metav1.OwnerReference{APIVersion: "operators.coreos.com/v1alpha1", Kind: "CatalogSource", Name: "c", UID: "c"}
	managed := map[string]string{"olm.managed": "true"}
	for _, tc := range []struct {
		name     string
		old, new View
		want     bool
	}{
		{"OLM's step: labelled and owned by a CSV", View{Labels: managed}, View{Labels: managed, OwnerReferences: []metav1.OwnerReference{csv}}, true},
		{"owned by a CSV, label gone", View{}, View{OwnerReferences: []metav1.OwnerReference{catalog, csv}}, true},
		// A catalog pod's ServiceAccount: OLM derives its imagePullSecrets from the CatalogSource.
		{"a catalog's ServiceAccount", View{Labels: managed}, View{Labels: managed, OwnerReferences: []metav1.OwnerReference{catalog}}, false},
		{"the CSV owner only on the old object", View{OwnerReferences: []metav1.OwnerReference{csv}}, View{Labels: managed}, false},
		{"CSV of another group", View{}, View{OwnerReferences: []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "ClusterServiceVersion"}}}, false},
		{"a plain ServiceAccount", View{Annotations: map[string]string{"a": "b"}}, View{}, false},
	} {
		if got := StepWrite(tc.old, tc.new); got != tc.want {
			t.Errorf("%s: StepWrite = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestIsOLMUser(t *testing.T) {
	users := DefaultOLMUsers()
	for _, tc := range []struct {
		user string
		want bool
	}{
		{"system:serviceaccount:olm:olm-operator-serviceaccount", true},
		{"system:serviceaccount:openshift-operator-lifecycle-manager:olm-operator-serviceaccount", true},
		// A tenant's ServiceAccount of the same name in its own namespace is not OLM.
		{"system:serviceaccount:tenant:olm-operator-serviceaccount", false},
		{"system:admin", false},
		{"", false},
	} {
		if got := IsOLMUser(tc.user, users); got != tc.want {
			t.Errorf("IsOLMUser(%q) = %v, want %v", tc.user, got, tc.want)
		}
	}
}
