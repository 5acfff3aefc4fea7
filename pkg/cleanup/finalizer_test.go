package cleanup

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/patchtest"
)

func TestFinalizerPatches(t *testing.T) {
	doc := []byte(`{"metadata":{"finalizers":["a","olmguard.io/cleanup","b"]}}`)
	got := patchtest.Finalizers(t, patchtest.Apply(t, doc, RemoveFinalizerPatch([]string{"a", "olmguard.io/cleanup", "b"}, "olmguard.io/cleanup")))
	if strings.Join(got, ",") != "a,b" {
		t.Errorf("after removal: %v", got)
	}
	if RemoveFinalizerPatch([]string{"a"}, "olmguard.io/cleanup") != nil {
		t.Error("removing an absent finalizer must be a no-op")
	}
	// A stale position fails the test operation instead of removing another finalizer.
	stale := RemoveFinalizerPatch([]string{"olmguard.io/cleanup"}, "olmguard.io/cleanup") // now at index 1
	raw, _ := json.Marshal(stale)
	if _, err := patchtest.ApplyRaw(doc, raw); err == nil {
		t.Error("a stale removal must fail")
	}
}

func TestWantsCleanupFinalizer(t *testing.T) {
	for _, tc := range []struct {
		name string
		csv  CSVView
		want bool
	}{
		{"a CSV", CSVView{Namespace: "ns"}, true},
		{"a copy by reason", CSVView{Namespace: "ns", Reason: "Copied"}, false},
		{"a copy by label", CSVView{Namespace: "ns", Labels: map[string]string{"olm.copiedFrom": "op"}}, false},
		{"a copy by operator namespace", CSVView{Namespace: "ns", Annotations: map[string]string{"olm.operatorNamespace": "op"}}, false},
		{"its own operator namespace", CSVView{Namespace: "ns", Annotations: map[string]string{"olm.operatorNamespace": "ns"}}, true},
		{"being deleted", CSVView{Namespace: "ns", Deleting: true}, false},
		{"opted out", CSVView{Namespace: "ns", Annotations: map[string]string{olmguard.CleanupAnnotation: olmguard.CleanupDisabled}}, false},
	} {
		if got := WantsCleanupFinalizer(tc.csv); got != tc.want {
			t.Errorf("%s: WantsCleanupFinalizer = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !HasFinalizer([]string{"a", olmguard.CleanupFinalizer}) || HasFinalizer([]string{"a"}) {
		t.Error("HasFinalizer does not find olmguard.io/cleanup")
	}
}
