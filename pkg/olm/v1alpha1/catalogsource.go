package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CatalogSource is a repository of operator bundles, served by bare catalog pods.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=catsrc,categories=olm
type CatalogSource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`

	Spec CatalogSourceSpec `json:"spec"`
	// +optional
	Status CatalogSourceStatus `json:"status,omitzero"`
}

// CatalogSourceSpec is the part of a CatalogSource spec olmguard reads.
//
// +kubebuilder:pruning:PreserveUnknownFields
type CatalogSourceSpec struct {
	SourceType  SourceType `json:"sourceType"`
	Image       string     `json:"image,omitempty"`
	Address     string     `json:"address,omitempty"`
	DisplayName string     `json:"displayName,omitempty"`
	Publisher   string     `json:"publisher,omitempty"`
}

// SourceType is how a catalog is served.
type SourceType string

const (
	SourceTypeInternal  SourceType = "internal"
	SourceTypeConfigmap SourceType = "configmap"
	SourceTypeGrpc      SourceType = "grpc"
)

// CatalogSourceStatus is written by the catalog-operator.
//
// +kubebuilder:pruning:PreserveUnknownFields
type CatalogSourceStatus struct {
	Message         string                 `json:"message,omitempty"`
	Reason          string                 `json:"reason,omitempty"`
	ConnectionState *GRPCConnectionState   `json:"connectionState,omitempty"`
	RegistryService *RegistryServiceStatus `json:"registryService,omitempty"`
}

// GRPCConnectionState is the last observed gRPC state: IDLE, CONNECTING, READY, TRANSIENT_FAILURE or SHUTDOWN.
//
// +kubebuilder:pruning:PreserveUnknownFields
type GRPCConnectionState struct {
	Address           string       `json:"address,omitempty"`
	LastObservedState string       `json:"lastObservedState"`
	LastConnectTime   *metav1.Time `json:"lastConnect,omitempty"`
}

// ConnectionStateReady is the lastObservedState of a catalog the catalog-operator can resolve from.
const ConnectionStateReady = "READY"

// RegistryServiceStatus is the Service in front of the catalog pods.
//
// +kubebuilder:pruning:PreserveUnknownFields
type RegistryServiceStatus struct {
	Protocol         string       `json:"protocol,omitempty"`
	ServiceName      string       `json:"serviceName,omitempty"`
	ServiceNamespace string       `json:"serviceNamespace,omitempty"`
	Port             string       `json:"port,omitempty"`
	CreatedAt        *metav1.Time `json:"createdAt,omitempty"`
}

// CatalogSourceList is a list of CatalogSources.
//
// +kubebuilder:object:root=true
type CatalogSourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CatalogSource `json:"items"`
}
