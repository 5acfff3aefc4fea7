package v1alpha1

import "github.com/olmguard/olmguard/pkg/olm"

// IsCopied reports whether a CSV is a copy the olm-operator made into a target namespace, as
// OLM's own ClusterServiceVersion.IsCopied decides it.
func (c *ClusterServiceVersion) IsCopied() bool {
	return olm.IsCopiedCSV(c.Namespace, c.Labels, c.Annotations, string(c.Status.Reason))
}
