// Package olm holds the names OLM v0 uses on the objects olmguard reads and writes: label and
// annotation keys, finalizers, phases, condition types and reasons, and small pure functions that
// reproduce how OLM derives names. Values are those of OLM v0.22 to v0.46 (see olm-facts.md).
// Typed views of the objects live in the v1alpha1 and v1 subpackages.
package olm

// API group and the service account OLM's operators run as.
const (
	Group = "operators.coreos.com"
	// ServiceAccountName is the identity of both olm-operator and catalog-operator.
	ServiceAccountName = "olm-operator-serviceaccount"
)

// InstallNamespaces are the namespaces OLM's manifests install it in: upstream's (olm) and
// OpenShift's (openshift-operator-lifecycle-manager).
var InstallNamespaces = []string{"olm", "openshift-operator-lifecycle-manager"}

// ServiceAccountUser is the user name the kube-apiserver gives OLM's olm-operator and
// catalog-operator when OLM runs in namespace.
func ServiceAccountUser(namespace string) string {
	return "system:serviceaccount:" + namespace + ":" + ServiceAccountName
}

// Labels OLM sets and reads. olmguard must never strip or change any of them.
const (
	OwnerLabel          = "olm.owner"
	OwnerNamespaceLabel = "olm.owner.namespace"
	OwnerKindLabel      = "olm.owner.kind"
	ManagedLabel        = "olm.managed"
	ManagedLabelValue   = "true"
	CopiedFromLabel     = "olm.copiedFrom"
	CatalogSourceLabel  = "olm.catalogSource"
	PodSpecHashLabel    = "olm.pod-spec-hash"
	// CatalogSourceUpdateLabel marks a registry-polling update pod.
	CatalogSourceUpdateLabel = "catalogsource.operators.coreos.com/update"
	// BundleUnpackRefLabel names the unpack ConfigMap on unpack Jobs (OLM >= v0.26).
	BundleUnpackRefLabel = "operatorframework.io/bundle-unpack-ref"
	// ComponentLabelPrefix starts the operators.coreos.com/<package>.<namespace> label.
	ComponentLabelPrefix = "operators.coreos.com/"
	// VersionLabel marks the CSVs OLM's own manifests install (packageserver): they have no
	// Subscription by design.
	VersionLabel = "olm.version"
	// ClusterOperatorNameLabel marks the CSVs olm-operator reports in a ClusterOperator's status
	// when it runs with --writePackageServerStatusName (OpenShift): only those reach the
	// replacement walk that loops on a spec.replaces cycle (OCPBUGS-23954).
	ClusterOperatorNameLabel = "olm.clusteroperator.name"
	// JobNameLabel is set by the Job API on pod templates; OLM watches unpack pods by it.
	JobNameLabel = "job-name"
)

// Annotations OLM sets and reads.
const (
	GeneratedByAnnotation       = "olm.generated-by"
	OperatorGroupAnnotation     = "olm.operatorGroup"
	OperatorNamespaceAnnotation = "olm.operatorNamespace"
	TargetNamespacesAnnotation  = "olm.targetNamespaces"
	ProvidedAPIsAnnotation      = "olm.providedAPIs"
	// SourceImageAnnotation is written by opm on unpack ConfigMaps.
	SourceImageAnnotation = "olm.sourceImage"
	// BundleUnpackTimeoutAnnotation on the OperatorGroup overrides the unpack Job deadline.
	BundleUnpackTimeoutAnnotation = "operatorframework.io/bundle-unpack-timeout"
	// BundleUnpackMinRetryIntervalAnnotation on the OperatorGroup turns on unpack retries (v0.26+).
	BundleUnpackMinRetryIntervalAnnotation = "operatorframework.io/bundle-unpack-min-retry-interval"
)

// CSVCleanupFinalizer is OLM's own CSV finalizer (v0.27+). olmguard never touches it.
const CSVCleanupFinalizer = "operators.coreos.com/csv-cleanup"

// Kinds.
const (
	SubscriptionKind = "Subscription"
	// ServiceAccountKind is core v1's ServiceAccount, which OLM creates for each CSV's permissions.
	ServiceAccountKind        = "ServiceAccount"
	InstallPlanKind           = "InstallPlan"
	ClusterServiceVersionKind = "ClusterServiceVersion"
	CatalogSourceKind         = "CatalogSource"
	OperatorGroupKind         = "OperatorGroup"
	// V1alpha1APIVersion is the apiVersion of Subscriptions, InstallPlans, CSVs and CatalogSources.
	V1alpha1APIVersion = Group + "/v1alpha1"
	V1APIVersion       = Group + "/v1"
)

// CatalogServerPort is the gRPC port of catalog pods.
const CatalogServerPort = 50051

// OLMConfig: OLM's cluster-wide settings (operators.coreos.com/v1, cluster-scoped, one object).
// spec.features.disableCopiedCSVs (since v0.20.0) stops the copies of operators installed for all
// namespaces and deletes those there are; no OLMConfig means copies are on (olm-facts N4).
const (
	OLMConfigKind    = "OLMConfig"
	OLMConfigVersion = "v1"
	OLMConfigName    = "cluster"
)
