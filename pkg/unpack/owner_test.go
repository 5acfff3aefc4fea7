package unpack

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
)

// TestCatalogSourceOwner: an unpack ConfigMap's CatalogSource owner is read as pkg/catalog reads a
// registry pod's (olm.IsCatalogSourceRef). Fails before the fix for "kind CatalogSource of
// another group", "no UID" and "OLM's after another owner": the kind alone made a ConfigMap OLM's.
func TestCatalogSourceOwner(t *testing.T) {
	managed := map[string]string{olm.ManagedLabel: olm.ManagedLabelValue}
	olms := metav1.OwnerReference{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: "cat", UID: "u"}
	forged := olms
	forged.APIVersion = "evil.example.com/v1alpha1"
	noUID := olms
	noUID.UID = ""
	for _, tc := range []struct {
		name   string
		labels map[string]string
		refs   []metav1.OwnerReference
		want   bool
	}{
		{"OLM's", managed, []metav1.OwnerReference{olms}, true},
		{"OLM's after another owner", managed, []metav1.OwnerReference{forged, olms}, true},
		{"not managed by OLM", nil, []metav1.OwnerReference{olms}, false},
		{"kind CatalogSource of another group", managed, []metav1.OwnerReference{forged}, false},
		{"no UID", managed, []metav1.OwnerReference{noUID}, false},
		{"no owner", managed, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: tc.labels, OwnerReferences: tc.refs}}
			ref, ok := CatalogSourceOwner(cm)
			if ok != tc.want || IsOLMConfigMap(cm) != tc.want || (ok && ref != olms) {
				t.Errorf("CatalogSourceOwner = %+v, %v; want %v", ref, ok, tc.want)
			}
		})
	}
}
