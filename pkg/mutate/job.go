package mutate

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
)

// UnpackJobPrefix starts every name olmguard gives an unpack Job. OLM's own names are sha256 hex
// (or hex plus a random suffix for retries), which never contain 'o' or 'u', so a renamed Job is
// recognisable and never renamed twice.
const UnpackJobPrefix = "ou-"

// maxNameLength is the Job name limit: the name is copied into label values (63 characters).
const maxNameLength = 63

// UnpackJobName is the name olmguard gives an unpack Job that OLM named name in namespace: a pure
// function of both, so OLM's retries map to the same name, at most 63 characters, a valid DNS label
// that differs from OLM's name. A legacy Job OLM can no longer find (OLM issue #3210) then never
// blocks the new one.
func UnpackJobName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return UnpackJobPrefix + hex.EncodeToString(sum[:])[:maxNameLength-len(UnpackJobPrefix)]
}

// UnpackJob is what the Job webhook reads of a Job.
type UnpackJob struct {
	Namespace, Name, GenerateName string
	Labels                        map[string]string
	OwnerReferences               []metav1.OwnerReference
	// HasTTL is true when spec.ttlSecondsAfterFinished is set (OLM v0.43+ sets 300).
	HasTTL bool
}

// IsOLMUnpackJob reports whether a Job is one OLM >= v0.26 finds by label: it carries
// operatorframework.io/bundle-unpack-ref and olm.managed=true and is owned by a ConfigMap. Jobs of
// OLM <= v0.25 have no label and are found by name only, so they must keep it.
func IsOLMUnpackJob(j UnpackJob) bool {
	if j.Labels[olm.BundleUnpackRefLabel] == "" || j.Labels[olm.ManagedLabel] != olm.ManagedLabelValue {
		return false
	}
	for _, r := range j.OwnerReferences {
		if r.Kind == "ConfigMap" && r.APIVersion == "v1" {
			return true
		}
	}
	return false
}

// UnpackJobPatch renames an OLM unpack Job to its namespace-scoped name and, when OLM left it
// unset, gives it a TTL. Labels, owners, service account and the rest of the spec are left as OLM
// wrote them. A Job that is not an OLM unpack Job, has no name yet, or was renamed already gets
// no patch.
func UnpackJobPatch(j UnpackJob, ttlSeconds int32) []jsonpatch.Operation {
	if !IsOLMUnpackJob(j) || j.Name == "" || strings.HasPrefix(j.Name, UnpackJobPrefix) {
		return nil
	}
	ops := []jsonpatch.Operation{jsonpatch.NewOperation("replace", "/metadata/name", UnpackJobName(j.Namespace, j.Name))}
	if !j.HasTTL && ttlSeconds > 0 {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/ttlSecondsAfterFinished", ttlSeconds))
	}
	return ops
}
