package v1alpha1

import "github.com/olmguard/olmguard/pkg/olm"

// IsCopied reports whether a CSV is a copy the olm-operator made into a target namespace, as
// OLM's own ClusterServiceVersion.IsCopied decides it.
func (c *ClusterServiceVersion) IsCopied() bool {
	if c.Status.Reason == CSVReasonCopied {
		return true
	}
	if ns, ok := c.Annotations[olm.OperatorNamespaceAnnotation]; ok && ns != c.Namespace {
		return true
	}
	_, copied := c.Labels[olm.CopiedFromLabel]
	return copied
}
