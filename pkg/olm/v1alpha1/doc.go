// Package v1alpha1 holds minimal typed views of OLM's operators.coreos.com/v1alpha1 kinds:
// only the fields olmguard and its OLM simulator use. Unknown fields are preserved by the CRDs
// generated from these types, and olmguard never writes whole objects back (it patches), so
// fields missing here are never lost.
//
// +kubebuilder:object:generate=true
// +groupName=operators.coreos.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is operators.coreos.com/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: "operators.coreos.com", Version: "v1alpha1"}
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(
		&Subscription{}, &SubscriptionList{},
		&InstallPlan{}, &InstallPlanList{},
		&ClusterServiceVersion{}, &ClusterServiceVersionList{},
		&CatalogSource{}, &CatalogSourceList{},
	)
}
