package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// InstallPlanPhase is status.phase of an InstallPlan.
type InstallPlanPhase string

const (
	InstallPlanPhaseNone             InstallPlanPhase = ""
	InstallPlanPhasePlanning         InstallPlanPhase = "Planning"
	InstallPlanPhaseRequiresApproval InstallPlanPhase = "RequiresApproval"
	InstallPlanPhaseInstalling       InstallPlanPhase = "Installing"
	InstallPlanPhaseComplete         InstallPlanPhase = "Complete"
	InstallPlanPhaseFailed           InstallPlanPhase = "Failed"
)

// InstallPlan condition types and reasons.
const (
	InstallPlanInstalled                = "Installed"
	InstallPlanReasonComponentFailed    = "InstallComponentFailed"
	InstallPlanReasonInstallCheckFailed = "InstallCheckFailed"
	// InstallPlanUnpackFailedPrefix starts the message of the Installed=False condition the
	// catalog-operator writes on a plan whose bundle could not be unpacked.
	InstallPlanUnpackFailedPrefix = "bundle unpacking failed"
)

// Bundle lookup condition types.
const (
	BundleLookupPending = "BundleLookupPending"
	BundleLookupFailed  = "BundleLookupFailed"
)

// InstallPlan is a set of resources OLM creates to install or upgrade operators in a namespace.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=ip,categories=olm
type InstallPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec InstallPlanSpec `json:"spec"`
	// +optional
	Status InstallPlanStatus `json:"status,omitzero"`
}

// InstallPlanSpec lists the CSVs to install and how the plan is approved.
//
// +kubebuilder:pruning:PreserveUnknownFields
type InstallPlanSpec struct {
	ClusterServiceVersionNames []string `json:"clusterServiceVersionNames"`
	Approval                   Approval `json:"approval"`
	Approved                   bool     `json:"approved"`
	Generation                 int      `json:"generation,omitempty"`
}

// InstallPlanStatus is written by the catalog-operator, first as a second request after Create.
//
// +kubebuilder:pruning:PreserveUnknownFields
type InstallPlanStatus struct {
	Phase          InstallPlanPhase       `json:"phase"`
	Conditions     []InstallPlanCondition `json:"conditions,omitempty"`
	CatalogSources []string               `json:"catalogSources"`
	Plan           []*Step                `json:"plan,omitempty"`
	BundleLookups  []BundleLookup         `json:"bundleLookups,omitempty"`
	StartTime      *metav1.Time           `json:"startTime,omitempty"`
	Message        string                 `json:"message,omitempty"`
	// DroppedSteps is how many steps Plan held when a cache dropped them: olmguard's controller
	// caches plans without their steps (an operator's plan often has dozens, and only the
	// cleanup reads them, live). Never sent or received.
	DroppedSteps int `json:"-"`
}

// Populated reports whether OLM has written the plan's first status. olmguard's controller never
// patches a plan before that: a write between OLM's Create and its UpdateStatus makes OLM fail.
func (s InstallPlanStatus) Populated() bool {
	return len(s.Plan) > 0 || s.DroppedSteps > 0 || len(s.BundleLookups) > 0
}

// DropSteps drops the plan's steps and keeps their number: Populated still holds. For readers that
// keep many plans and read no step (the controller's cache, doctor's audit).
func (s *InstallPlanStatus) DropSteps() {
	if n := len(s.Plan); n > 0 {
		s.DroppedSteps, s.Plan = n, nil
	}
}

// InstallPlanCondition is one InstallPlan condition.
//
// +kubebuilder:pruning:PreserveUnknownFields
type InstallPlanCondition struct {
	Type               string                 `json:"type,omitempty"`
	Status             corev1.ConditionStatus `json:"status,omitempty"`
	LastUpdateTime     *metav1.Time           `json:"lastUpdateTime,omitempty"`
	LastTransitionTime *metav1.Time           `json:"lastTransitionTime,omitempty"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
}

// Step is one resource of a plan.
//
// +kubebuilder:pruning:PreserveUnknownFields
type Step struct {
	Resolving string       `json:"resolving"`
	Resource  StepResource `json:"resource"`
	Optional  bool         `json:"optional,omitempty"`
	Status    string       `json:"status"`
}

// StepResource names the resource a step creates. For unpacked bundles Manifest is a JSON
// reference to the unpack ConfigMap, not the object itself.
//
// +kubebuilder:pruning:PreserveUnknownFields
type StepResource struct {
	CatalogSource          string `json:"sourceName"`
	CatalogSourceNamespace string `json:"sourceNamespace"`
	Group                  string `json:"group"`
	Version                string `json:"version"`
	Kind                   string `json:"kind"`
	Name                   string `json:"name"`
	Manifest               string `json:"manifest,omitempty"`
}

// BundleLookup is a bundle the plan waits to unpack.
//
// +kubebuilder:pruning:PreserveUnknownFields
type BundleLookup struct {
	Path             string                  `json:"path"`
	Identifier       string                  `json:"identifier"`
	Replaces         string                  `json:"replaces"`
	CatalogSourceRef *corev1.ObjectReference `json:"catalogSourceRef"`
	Conditions       []BundleLookupCondition `json:"conditions,omitempty"`
}

// BundleLookupCondition is one condition of a bundle lookup.
//
// +kubebuilder:pruning:PreserveUnknownFields
type BundleLookupCondition struct {
	Type               string                 `json:"type"`
	Status             corev1.ConditionStatus `json:"status"`
	Reason             string                 `json:"reason,omitempty"`
	Message            string                 `json:"message,omitempty"`
	LastUpdateTime     *metav1.Time           `json:"lastUpdateTime,omitempty"`
	LastTransitionTime *metav1.Time           `json:"lastTransitionTime,omitempty"`
}

// InstallPlanList is a list of InstallPlans.
//
// +kubebuilder:object:root=true
type InstallPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []InstallPlan `json:"items"`
}
