package olm

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIsCatalogSourceRef(t *testing.T) {
	for _, tc := range []struct {
		name string
		ref  metav1.OwnerReference
		want bool
	}{
		{"as OLM writes it", metav1.OwnerReference{APIVersion: V1alpha1APIVersion, Kind: CatalogSourceKind, Name: "cat", UID: "u"}, true},
		{"another group", metav1.OwnerReference{APIVersion: "evil.example.com/v1alpha1", Kind: CatalogSourceKind, Name: "cat", UID: "u"}, false},
		{"another version", metav1.OwnerReference{APIVersion: V1APIVersion, Kind: CatalogSourceKind, Name: "cat", UID: "u"}, false},
		{"no apiVersion", metav1.OwnerReference{Kind: CatalogSourceKind, Name: "cat", UID: "u"}, false},
		{"another kind", metav1.OwnerReference{APIVersion: V1alpha1APIVersion, Kind: SubscriptionKind, Name: "cat", UID: "u"}, false},
		{"no name", metav1.OwnerReference{APIVersion: V1alpha1APIVersion, Kind: CatalogSourceKind, UID: "u"}, false},
		{"no UID", metav1.OwnerReference{APIVersion: V1alpha1APIVersion, Kind: CatalogSourceKind, Name: "cat"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsCatalogSourceRef(tc.ref); got != tc.want {
				t.Errorf("IsCatalogSourceRef = %v, want %v", got, tc.want)
			}
		})
	}
}
