// Package v1 holds a minimal typed view of OLM's operators.coreos.com/v1 OperatorGroup.
//
// +kubebuilder:object:generate=true
// +groupName=operators.coreos.com
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is operators.coreos.com/v1.
	GroupVersion = schema.GroupVersion{Group: "operators.coreos.com", Version: "v1"}
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &OperatorGroup{}, &OperatorGroupList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
