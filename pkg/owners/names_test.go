package owners

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm"
)

func TestNamesSubscription(t *testing.T) {
	r := func(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
	}
	for _, tc := range []struct {
		name string
		refs []metav1.OwnerReference
		want bool
	}{
		{"OLM's reference", []metav1.OwnerReference{SubscriptionOwnerRef("a", "uid-a")}, true},
		{"another version of OLM's group", []metav1.OwnerReference{r(olm.Group+"/v1", olm.SubscriptionKind, "a", "uid-a")}, true},
		{"no UID in the reference", []metav1.OwnerReference{r(olm.V1alpha1APIVersion, olm.SubscriptionKind, "a", "")}, true},
		{"another UID: a Subscription of that name recreated", []metav1.OwnerReference{r(olm.V1alpha1APIVersion, olm.SubscriptionKind, "a", "uid-old")}, false},
		{"another name", []metav1.OwnerReference{SubscriptionOwnerRef("b", "uid-a")}, false},
		{"another kind", []metav1.OwnerReference{r(olm.V1alpha1APIVersion, olm.InstallPlanKind, "a", "uid-a")}, false},
		{"kind Subscription of another group", []metav1.OwnerReference{r("evil.example.com/v1", olm.SubscriptionKind, "a", "uid-a")}, false},
		{"no apiVersion", []metav1.OwnerReference{r("", olm.SubscriptionKind, "a", "uid-a")}, false},
		{"one of several", []metav1.OwnerReference{SubscriptionOwnerRef("b", "uid-b"), SubscriptionOwnerRef("a", "uid-a")}, true},
		{"none", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NamesSubscription(tc.refs, "a", "uid-a"); got != tc.want {
				t.Errorf("NamesSubscription = %v, want %v", got, tc.want)
			}
		})
	}
}
