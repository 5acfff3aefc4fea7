package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Approval is an InstallPlan approval strategy.
type Approval string

const (
	ApprovalAutomatic Approval = "Automatic"
	ApprovalManual    Approval = "Manual"
)

// SubscriptionState is status.state of a Subscription.
type SubscriptionState string

const (
	SubscriptionStateNone           SubscriptionState = ""
	SubscriptionStateFailed         SubscriptionState = "UpgradeFailed"
	SubscriptionStateUpgradePending SubscriptionState = "UpgradePending"
	SubscriptionStateAtLatest       SubscriptionState = "AtLatestKnown"
)

// SubscriptionConditionType is a Subscription condition type. OLM's conditions are abnormal-true.
type SubscriptionConditionType string

const (
	SubscriptionCatalogSourcesUnhealthy SubscriptionConditionType = "CatalogSourcesUnhealthy"
	SubscriptionInstallPlanMissing      SubscriptionConditionType = "InstallPlanMissing"
	SubscriptionInstallPlanPending      SubscriptionConditionType = "InstallPlanPending"
	SubscriptionInstallPlanFailed       SubscriptionConditionType = "InstallPlanFailed"
	SubscriptionResolutionFailed        SubscriptionConditionType = "ResolutionFailed"
	SubscriptionBundleUnpacking         SubscriptionConditionType = "BundleUnpacking"
	SubscriptionBundleUnpackFailed      SubscriptionConditionType = "BundleUnpackFailed"
)

// Subscription condition reasons.
const (
	ReasonReferencedInstallPlanNotFound = "ReferencedInstallPlanNotFound"
	ReasonInstallPlanNotYetReconciled   = "InstallPlanNotYetReconciled"
	ReasonInstallPlanFailed             = "InstallPlanFailed"
	ReasonUnpackingInProgress           = "UnpackingInProgress"
	ReasonErrorPreventedUnpacking       = "ErrorPreventedUnpacking"
	ReasonBundleUnpackFailed            = "BundleUnpackFailed"
	ReasonEnsureInstallPlanFailed       = "EnsureInstallPlanFailed"
)

// Subscription keeps an operator package installed and up to date.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName={sub,subs},categories=olm
type Subscription struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec SubscriptionSpec `json:"spec"`
	// +optional
	Status SubscriptionStatus `json:"status,omitzero"`
}

// SubscriptionSpec names the package, channel and catalog.
//
// +kubebuilder:pruning:PreserveUnknownFields
type SubscriptionSpec struct {
	CatalogSource          string   `json:"source"`
	CatalogSourceNamespace string   `json:"sourceNamespace"`
	Package                string   `json:"name"`
	Channel                string   `json:"channel,omitempty"`
	StartingCSV            string   `json:"startingCSV,omitempty"`
	InstallPlanApproval    Approval `json:"installPlanApproval,omitempty"`
}

// SubscriptionStatus is written by OLM's catalog-operator only.
//
// +kubebuilder:pruning:PreserveUnknownFields
type SubscriptionStatus struct {
	CurrentCSV            string                  `json:"currentCSV,omitempty"`
	InstalledCSV          string                  `json:"installedCSV,omitempty"`
	Install               *InstallPlanReference   `json:"installplan,omitempty"`
	State                 SubscriptionState       `json:"state,omitempty"`
	InstallPlanGeneration int                     `json:"installPlanGeneration,omitempty"`
	InstallPlanRef        *corev1.ObjectReference `json:"installPlanRef,omitempty"`
	Conditions            []SubscriptionCondition `json:"conditions,omitempty"`
	LastUpdated           metav1.Time             `json:"lastUpdated"`
}

// InstallPlanReference is the deprecated status.installplan pointer.
//
// +kubebuilder:pruning:PreserveUnknownFields
type InstallPlanReference struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	UID        string `json:"uuid"`
}

// SubscriptionCondition is one Subscription condition.
//
// +kubebuilder:pruning:PreserveUnknownFields
type SubscriptionCondition struct {
	Type               SubscriptionConditionType `json:"type"`
	Status             corev1.ConditionStatus    `json:"status"`
	Reason             string                    `json:"reason,omitempty"`
	Message            string                    `json:"message,omitempty"`
	LastHeartbeatTime  *metav1.Time              `json:"lastHeartbeatTime,omitempty"`
	LastTransitionTime *metav1.Time              `json:"lastTransitionTime,omitempty"`
}

// GetCondition returns the condition of the given type, or nil.
func (s *SubscriptionStatus) GetCondition(t SubscriptionConditionType) *SubscriptionCondition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == t {
			return &s.Conditions[i]
		}
	}
	return nil
}

// SetCondition replaces the condition of the same type or appends it.
func (s *SubscriptionStatus) SetCondition(c SubscriptionCondition) {
	if old := s.GetCondition(c.Type); old != nil {
		*old = c
		return
	}
	s.Conditions = append(s.Conditions, c)
}

// RemoveConditions drops the conditions of the given types.
func (s *SubscriptionStatus) RemoveConditions(types ...SubscriptionConditionType) {
	kept := s.Conditions[:0]
	for _, c := range s.Conditions {
		drop := false
		for _, t := range types {
			drop = drop || c.Type == t
		}
		if !drop {
			kept = append(kept, c)
		}
	}
	s.Conditions = kept
}

// SubscriptionList is a list of Subscriptions.
//
// +kubebuilder:object:root=true
type SubscriptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Subscription `json:"items"`
}
