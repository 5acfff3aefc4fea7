package olm

import (
	"crypto/sha256"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxLabelValue is the Kubernetes limit for label values and DNS labels.
const maxLabelValue = 63

// UnpackName is the name OLM gives the unpack ConfigMap, Job, Role, RoleBinding and ServiceAccount of
// a bundle: the sha256 of the bundle image path in hex, truncated to 63 characters. It does not
// depend on the namespace the bundle is installed into (the root of OLM issue #3210).
func UnpackName(bundlePath string) string {
	sum := sha256.Sum256([]byte(bundlePath))
	return fmt.Sprintf("%x", sum)[:maxLabelValue]
}

// ComponentLabelKey is the operators.coreos.com/<package>.<namespace> label key the adoption
// controller puts on a Subscription, its CSV and its latest InstallPlan. The name part is cut to 63
// characters and trailing '.', '-' and '_' are stripped.
func ComponentLabelKey(pkg, namespace string) string {
	name := pkg + "." + namespace
	if len(name) > maxLabelValue {
		name = name[:maxLabelValue]
	}
	return ComponentLabelPrefix + strings.TrimRight(name, ".-_")
}

// OwnerLabels are the three labels OLM puts on cluster-scoped objects that belong to a CSV.
func OwnerLabels(csvName, csvNamespace string) map[string]string {
	return map[string]string{
		OwnerLabel:          csvName,
		OwnerNamespaceLabel: csvNamespace,
		OwnerKindLabel:      ClusterServiceVersionKind,
	}
}

// ServiceName is the name of the Service OLM creates for a deployment that serves webhooks or APIs.
func ServiceName(deploymentName string) string { return deploymentName + "-service" }

// AuthReaderRoleBindingName is the kube-system RoleBinding OLM creates for a webhook or API service
// and never deletes.
func AuthReaderRoleBindingName(serviceName string) string { return serviceName + "-auth-reader" }

// CopiedReason is the status.reason of the copies olm-operator makes of a CSV in every target
// namespace of its OperatorGroup.
const CopiedReason = "Copied"

// IsCopiedCSV reports whether a CSV is such a copy, as OLM's ClusterServiceVersion.IsCopied
// decides it: reason Copied, an operator-namespace annotation naming another namespace, or the
// copied-from label. Copies own nothing, so olmguard never cleans up after one.
func IsCopiedCSV(namespace string, labels, annotations map[string]string, reason string) bool {
	if reason == CopiedReason {
		return true
	}
	if ns, ok := annotations[OperatorNamespaceAnnotation]; ok && ns != namespace {
		return true
	}
	_, copied := labels[CopiedFromLabel]
	return copied
}

// IsCatalogSourceRef reports whether an ownerReference names a CatalogSource as OLM writes it on
// the registry pods and the bundle unpack ConfigMaps it creates: apiVersion
// operators.coreos.com/v1alpha1, kind CatalogSource, a name and a UID. Anyone who can write the
// object can write such a reference: it proves nothing until a CatalogSource of that name and UID
// is found.
func IsCatalogSourceRef(r metav1.OwnerReference) bool {
	return r.APIVersion == V1alpha1APIVersion && r.Kind == CatalogSourceKind && r.Name != "" && r.UID != ""
}
