package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// OperatorGroup selects the namespaces the operators installed in its namespace watch.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=og,categories=olm
// +kubebuilder:storageversion
type OperatorGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	// +optional
	Spec OperatorGroupSpec `json:"spec,omitzero"`
	// +optional
	Status OperatorGroupStatus `json:"status,omitzero"`
}

// OperatorGroupSpec chooses target namespaces by list or by selector; neither means all namespaces.
//
// +kubebuilder:pruning:PreserveUnknownFields
type OperatorGroupSpec struct {
	TargetNamespaces []string              `json:"targetNamespaces,omitempty"`
	Selector         *metav1.LabelSelector `json:"selector,omitempty"`
}

// OperatorGroupStatus lists the namespaces OLM resolved; [""] means all namespaces.
//
// +kubebuilder:pruning:PreserveUnknownFields
type OperatorGroupStatus struct {
	Namespaces  []string    `json:"namespaces,omitempty"`
	LastUpdated metav1.Time `json:"lastUpdated"`
}

// AllNamespaces reports whether the group targets every namespace.
func (s OperatorGroupStatus) AllNamespaces() bool {
	return len(s.Namespaces) == 1 && s.Namespaces[0] == metav1.NamespaceAll
}

// OperatorGroupList is a list of OperatorGroups.
//
// +kubebuilder:object:root=true
type OperatorGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []OperatorGroup `json:"items"`
}
