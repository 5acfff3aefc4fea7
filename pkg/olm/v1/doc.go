// Package v1 holds a minimal typed view of OLM's operators.coreos.com/v1 OperatorGroup.
//
// +kubebuilder:object:generate=true
// +groupName=operators.coreos.com
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is operators.coreos.com/v1.
	GroupVersion = schema.GroupVersion{Group: "operators.coreos.com", Version: "v1"}
	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types of this group version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&OperatorGroup{}, &OperatorGroupList{})
}
