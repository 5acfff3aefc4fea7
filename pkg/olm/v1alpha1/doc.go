// Package v1alpha1 holds minimal typed views of OLM's operators.coreos.com/v1alpha1 kinds:
// only the fields olmguard and its OLM simulator use. Unknown fields are preserved by the CRDs
// generated from these types, and olmguard never writes whole objects back (it patches), so
// fields missing here are never lost.
//
// +kubebuilder:object:generate=true
// +groupName=operators.coreos.com
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is operators.coreos.com/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "operators.coreos.com", Version: "v1alpha1"}
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&Subscription{}, &SubscriptionList{},
		&InstallPlan{}, &InstallPlanList{},
		&ClusterServiceVersion{}, &ClusterServiceVersionList{},
		&CatalogSource{}, &CatalogSourceList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
