package drift

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// The plan a Subscription references is found by name in the Subscription's own namespace, as
// OLM's lister finds it, whatever namespace the reference names.
func TestPlanKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ref    *corev1.ObjectReference
		want   types.NamespacedName
		wantOK bool
	}{
		{name: "no reference", ref: nil},
		{name: "a reference without a name", ref: &corev1.ObjectReference{Namespace: "ns"}},
		{name: "a plan by name", ref: &corev1.ObjectReference{Name: "install-1"}, want: types.NamespacedName{Namespace: "ns", Name: "install-1"}, wantOK: true},
		{name: "another namespace named: the Subscription's own", ref: &corev1.ObjectReference{Namespace: "elsewhere", Name: "install-1"},
			want: types.NamespacedName{Namespace: "ns", Name: "install-1"}, wantOK: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}}
			sub.Status.InstallPlanRef = tc.ref
			got, ok := PlanKey(sub)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("PlanKey = %v, %v; want %v, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
