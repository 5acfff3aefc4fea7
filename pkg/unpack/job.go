package unpack

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamePrefix starts every name olmguard gives an unpack Job. OLM's own names are sha256 hex
// (or hex plus a random suffix for retries), which never contain 'o' or 'u', so a renamed Job is
// recognisable and never renamed twice.
const NamePrefix = "ou-"

// maxNameLength is the Job name limit: the name is copied into label values (63 characters).
const maxNameLength = 63

// ScopedName is the name olmguard gives an unpack Job that OLM named name in namespace: a pure
// function of both, so OLM's retries map to the same name, at most 63 characters, a valid DNS label
// that differs from OLM's name. A legacy Job OLM can no longer find (OLM issue #3210) then never
// blocks the new one.
func ScopedName(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return NamePrefix + hex.EncodeToString(sum[:])[:maxNameLength-len(NamePrefix)]
}

// Job is what the Job webhook reads of a Job.
type Job struct {
	Namespace, Name, GenerateName string
	Labels                        map[string]string
	OwnerReferences               []metav1.OwnerReference
	// HasTTL is true when spec.ttlSecondsAfterFinished is set (OLM v0.43+ sets 300).
	HasTTL bool
}

// IsOLMJob reports whether a Job is one OLM >= v0.26 finds by label: it carries
// operatorframework.io/bundle-unpack-ref and olm.managed=true and is owned by a ConfigMap. Jobs of
// OLM <= v0.25 have no label and are found by name only, so they must keep it.
func IsOLMJob(j Job) bool {
	if !FoundByLabel(j.Labels) {
		return false
	}
	return ConfigMapOwner(&metav1.ObjectMeta{OwnerReferences: j.OwnerReferences}) != ""
}

// RenamePatch renames an OLM unpack Job to its namespace-scoped name and, when OLM left it
// unset, gives it a TTL. Labels, owners, service account and the rest of the spec are left as OLM
// wrote them. A Job that is not an OLM unpack Job, has no name yet, or was renamed already gets
// no patch.
func RenamePatch(j Job, ttlSeconds int32) []jsonpatch.Operation {
	if !IsOLMJob(j) || j.Name == "" || strings.HasPrefix(j.Name, NamePrefix) {
		return nil
	}
	ops := []jsonpatch.Operation{jsonpatch.NewOperation("replace", "/metadata/name", ScopedName(j.Namespace, j.Name))}
	if !j.HasTTL && ttlSeconds > 0 {
		ops = append(ops, jsonpatch.NewOperation("add", "/spec/ttlSecondsAfterFinished", ttlSeconds))
	}
	return ops
}
