package scheme

import (
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Every kind a binary reads: built-in, CRDs, and OLM's typed views.
func TestNewKnowsEveryKind(t *testing.T) {
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, gvk := range []schema.GroupVersionKind{
		corev1.SchemeGroupVersion.WithKind("Pod"), batchv1.SchemeGroupVersion.WithKind("Job"),
		apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"),
		v1alpha1.GroupVersion.WithKind("Subscription"), v1alpha1.GroupVersion.WithKind("InstallPlan"),
		v1alpha1.GroupVersion.WithKind("ClusterServiceVersion"), v1alpha1.GroupVersion.WithKind("CatalogSource"),
		olmv1.GroupVersion.WithKind("OperatorGroup"),
	} {
		if !s.Recognizes(gvk) {
			t.Errorf("scheme does not know %s", gvk)
		}
	}
}
