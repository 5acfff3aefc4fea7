// Package patchtest applies the JSON patches olmguard's decisions return to real documents, so
// tests assert on the patched object rather than on the operations.
package patchtest

import (
	"encoding/json"
	"testing"

	jsonpatchapply "github.com/evanphx/json-patch/v5"
	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Apply applies ops to doc and fails the test if the patch does not apply.
func Apply(t testing.TB, doc []byte, ops []jsonpatch.Operation) []byte {
	t.Helper()
	if len(ops) == 0 {
		return doc
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	out, err := ApplyRaw(doc, raw)
	if err != nil {
		t.Fatalf("patch %s does not apply: %v", raw, err)
	}
	return out
}

// ApplyRaw applies an encoded JSON patch, as the apiserver does.
func ApplyRaw(doc, rawPatch []byte) ([]byte, error) {
	p, err := jsonpatchapply.DecodePatch(rawPatch)
	if err != nil {
		return nil, err
	}
	return p.Apply(doc)
}

// PlanJSON renders a minimal InstallPlan install-1 in namespace ns with the given
// ownerReferences (nil: the field is absent).
func PlanJSON(t testing.TB, refs []metav1.OwnerReference) []byte {
	t.Helper()
	meta := map[string]any{"name": "install-1", "namespace": "ns"}
	if refs != nil {
		meta["ownerReferences"] = refs
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "metadata": meta,
		"spec": map[string]any{"approval": "Automatic", "approved": true, "clusterServiceVersionNames": []string{"x"}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// OwnerRefs returns a document's metadata.ownerReferences.
func OwnerRefs(t testing.TB, doc []byte) []metav1.OwnerReference {
	t.Helper()
	return meta(t, doc).OwnerReferences
}

// Finalizers returns a document's metadata.finalizers.
func Finalizers(t testing.TB, doc []byte) []string {
	t.Helper()
	return meta(t, doc).Finalizers
}

func meta(t testing.TB, doc []byte) metav1.ObjectMeta {
	t.Helper()
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	return m.Metadata
}
