package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/olmguard/olmguard/pkg/olm"
)

// ClusterServiceVersionPhase is status.phase of a CSV.
type ClusterServiceVersionPhase string

const (
	CSVPhaseNone         ClusterServiceVersionPhase = ""
	CSVPhasePending      ClusterServiceVersionPhase = "Pending"
	CSVPhaseInstallReady ClusterServiceVersionPhase = "InstallReady"
	CSVPhaseInstalling   ClusterServiceVersionPhase = "Installing"
	CSVPhaseSucceeded    ClusterServiceVersionPhase = "Succeeded"
	CSVPhaseFailed       ClusterServiceVersionPhase = "Failed"
	CSVPhaseReplacing    ClusterServiceVersionPhase = "Replacing"
	CSVPhaseDeleting     ClusterServiceVersionPhase = "Deleting"
)

// ConditionReason is status.reason of a CSV.
type ConditionReason string

const (
	CSVReasonCopied            ConditionReason = olm.CopiedReason
	CSVReasonBeingReplaced     ConditionReason = "BeingReplaced"
	CSVReasonReplaced          ConditionReason = "Replaced"
	CSVReasonInstallSuccessful ConditionReason = "InstallSucceeded"
	// CSVReasonRequirementsNotMet and CSVReasonRequirementsUnknown: a CSV Pending on what its
	// requirements (CRDs, permissions, APIs) miss.
	CSVReasonRequirementsNotMet  ConditionReason = "RequirementsNotMet"
	CSVReasonRequirementsUnknown ConditionReason = "RequirementsUnknown"
	// CSVReasonTooManyOperatorGroups: olm-operator fails every CSV of a namespace holding more
	// than one OperatorGroup (operatorGroupForCSV; OLM PR #669).
	CSVReasonTooManyOperatorGroups ConditionReason = "TooManyOperatorGroups"
	// CSVReasonNoOperatorGroup: olm-operator fails a CSV in a namespace without an OperatorGroup.
	CSVReasonNoOperatorGroup ConditionReason = "NoOperatorGroup"
)

// ClusterServiceVersion describes one version of an installed operator.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={csv,csvs},categories=olm
type ClusterServiceVersion struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec ClusterServiceVersionSpec `json:"spec"`
	// +optional
	Status ClusterServiceVersionStatus `json:"status,omitzero"`
}

// ClusterServiceVersionSpec carries the fields olmguard reads to classify and clean up a CSV.
//
// +kubebuilder:pruning:PreserveUnknownFields
type ClusterServiceVersionSpec struct {
	DisplayName     string               `json:"displayName"`
	Version         string               `json:"version,omitempty"`
	Replaces        string               `json:"replaces,omitempty"`
	InstallStrategy NamedInstallStrategy `json:"install"`
	// +optional
	CustomResourceDefinitions CustomResourceDefinitions `json:"customresourcedefinitions,omitzero"`
	// +optional
	APIServiceDefinitions APIServiceDefinitions `json:"apiservicedefinitions,omitzero"`
	WebhookDefinitions    []WebhookDescription  `json:"webhookdefinitions,omitempty"`
	// Cleanup is OLM's own, never implemented, opt-in for operand deletion; olmguard honours it.
	// +optional
	Cleanup CleanupSpec `json:"cleanup,omitzero"`
}

// NamedInstallStrategy is the install strategy; olmguard does not read its details.
//
// +kubebuilder:pruning:PreserveUnknownFields
type NamedInstallStrategy struct {
	StrategyName string `json:"strategy"`
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	// +optional
	StrategySpec runtime.RawExtension `json:"spec,omitzero"`
}

// CustomResourceDefinitions lists the CRDs a CSV owns and requires.
//
// +kubebuilder:pruning:PreserveUnknownFields
type CustomResourceDefinitions struct {
	Owned    []CRDDescription `json:"owned,omitempty"`
	Required []CRDDescription `json:"required,omitempty"`
}

// CRDDescription names a CRD as <plural>.<group> with one of its versions and its kind.
//
// +kubebuilder:pruning:PreserveUnknownFields
type CRDDescription struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Kind        string `json:"kind"`
	DisplayName string `json:"displayName,omitempty"`
}

// APIServiceDefinitions lists the aggregated APIs a CSV owns.
//
// +kubebuilder:pruning:PreserveUnknownFields
type APIServiceDefinitions struct {
	Owned []APIServiceDescription `json:"owned,omitempty"`
}

// APIServiceDescription is one aggregated API served by a deployment of the CSV.
//
// +kubebuilder:pruning:PreserveUnknownFields
type APIServiceDescription struct {
	Name           string `json:"name"`
	Group          string `json:"group"`
	Version        string `json:"version"`
	Kind           string `json:"kind"`
	DeploymentName string `json:"deploymentName,omitempty"`
	ContainerPort  int32  `json:"containerPort,omitempty"`
}

// WebhookDescription is one admission or conversion webhook served by a deployment of the CSV.
//
// +kubebuilder:pruning:PreserveUnknownFields
type WebhookDescription struct {
	GenerateName            string   `json:"generateName"`
	Type                    string   `json:"type"`
	DeploymentName          string   `json:"deploymentName,omitempty"`
	ContainerPort           int32    `json:"containerPort,omitempty"`
	SideEffects             string   `json:"sideEffects"`
	AdmissionReviewVersions []string `json:"admissionReviewVersions"`
	ConversionCRDs          []string `json:"conversionCRDs,omitempty"`
}

// CleanupSpec is spec.cleanup.
//
// +kubebuilder:pruning:PreserveUnknownFields
type CleanupSpec struct {
	Enabled bool `json:"enabled"`
}

// ClusterServiceVersionStatus is written by the olm-operator.
//
// +kubebuilder:pruning:PreserveUnknownFields
type ClusterServiceVersionStatus struct {
	Phase   ClusterServiceVersionPhase `json:"phase,omitempty"`
	Reason  ConditionReason            `json:"reason,omitempty"`
	Message string                     `json:"message,omitempty"`
	// LastTransitionTime is when OLM last changed the phase (a reason change alone keeps it).
	LastTransitionTime *metav1.Time `json:"lastTransitionTime,omitempty"`
}

// ClusterServiceVersionList is a list of CSVs.
//
// +kubebuilder:object:root=true
type ClusterServiceVersionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterServiceVersion `json:"items"`
}
