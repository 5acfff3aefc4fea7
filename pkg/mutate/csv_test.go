package mutate

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/patchtest"
)

func csvRequest(op admissionv1.Operation, obj []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Namespace: "ns", Operation: op,
		Kind: metav1.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "ClusterServiceVersion"}, Object: runtime.RawExtension{Raw: obj}}}
}

func csvJSON(t testing.TB, meta map[string]any, reason string) []byte {
	meta["name"], meta["namespace"] = "op.v1", "ns"
	b, err := json.Marshal(map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": meta,
		"spec": map[string]any{"displayName": "op", "description": strings.Repeat("x", 4096)}, "status": map[string]any{"reason": reason}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCSVHandler(t *testing.T) {
	olmFinalizer := "operators.coreos.com/csv-cleanup"
	tests := []struct {
		name   string
		op     admissionv1.Operation
		meta   map[string]any
		reason string
		want   []string // finalizers after the patch; nil: no patch
	}{
		{"new CSV", admissionv1.Create, map[string]any{}, "", []string{olmguard.CleanupFinalizer}},
		{"OLM's finalizer kept, ours appended", admissionv1.Update, map[string]any{"finalizers": []string{olmFinalizer}}, "", []string{olmFinalizer, olmguard.CleanupFinalizer}},
		{"already there", admissionv1.Update, map[string]any{"finalizers": []string{olmguard.CleanupFinalizer}}, "", nil},
		{"copied by reason", admissionv1.Create, map[string]any{}, "Copied", nil},
		{"copied by label", admissionv1.Create, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x"}}, "", nil},
		{"copied by operator namespace", admissionv1.Create, map[string]any{"annotations": map[string]string{"olm.operatorNamespace": "x"}}, "", nil},
		{"opted out", admissionv1.Create, map[string]any{"annotations": map[string]string{"olmguard.io/cleanup": "disabled"}}, "", nil},
		{"being deleted", admissionv1.Update, map[string]any{"deletionTimestamp": "2026-11-21T10:00:00Z"}, "", nil},
		{"delete", admissionv1.Delete, map[string]any{}, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := csvJSON(t, tt.meta, tt.reason)
			r := served(CSVHandler{}).Handle(context.Background(), csvRequest(tt.op, obj))
			if !r.Allowed {
				t.Fatalf("denied: %+v", r.Result)
			}
			if tt.want == nil {
				if len(r.Patches) != 0 {
					t.Fatalf("unexpected patch %v", r.Patches)
				}
				return
			}
			got := patchtest.Finalizers(t, patchtest.Apply(t, obj, r.Patches))
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Fatalf("finalizers = %v, want %v", got, tt.want)
			}
		})
	}
	if r := served(CSVHandler{}).Handle(context.Background(), csvRequest(admissionv1.Create, []byte(`{"spec":{}}`))); r.Allowed || r.Result.Code != 400 {
		t.Errorf("no metadata: %+v", r.Result)
	}
}

// An update that marks a CSV as a copy while removing olmguard's finalizer gets the finalizer back:
// whether a CSV is a copy is judged from the old object too, and OLM never turns a CSV into a copy
// (issue 31 item 7). Fails before the fix: the handler read the new object only, took the label
// for OLM's, and left the finalizer off, so the CSV's later deletion skipped the cleanup.
func TestCSVHandlerCopyMarksAddedInAnUpdate(t *testing.T) {
	plain := csvJSON(t, map[string]any{"finalizers": []string{olmguard.CleanupFinalizer}}, "")
	copied := csvJSON(t, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x"}}, "Copied")
	tests := []struct {
		name     string
		old, obj []byte
		want     bool // the finalizer is put back
	}{
		{"label added", plain, csvJSON(t, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x"}}, ""), true},
		{"labelled earlier, finalizer removed now", csvJSON(t, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x"}, "finalizers": []string{olmguard.CleanupFinalizer}}, ""),
			csvJSON(t, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x"}}, ""), true},
		{"operator namespace annotation added", plain, csvJSON(t, map[string]any{"annotations": map[string]string{"olm.operatorNamespace": "x"}}, ""), true},
		{"label added, opted out in the same update", plain,
			csvJSON(t, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x"}, "annotations": map[string]string{"olmguard.io/cleanup": "disabled"}}, ""), false},
		{"OLM updates its copy", copied, csvJSON(t, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x", "a": "b"}}, "Copied"), false},
		{"no old object: the new one decides", nil, csvJSON(t, map[string]any{"labels": map[string]string{"olm.copiedFrom": "x"}}, ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := allowedCSVUpdate(t, tt.old, tt.obj)
			if got := len(r.Patches) > 0; got != tt.want {
				t.Fatalf("finalizer put back: %v, want %v (%v)", got, tt.want, r.Patches)
			}
			if tt.want {
				if got := patchtest.Finalizers(t, patchtest.Apply(t, tt.obj, r.Patches)); strings.Join(got, ",") != olmguard.CleanupFinalizer {
					t.Fatalf("finalizers = %v", got)
				}
			}
		})
	}
}

// A CSV labelled olm.copiedFrom that holds olmguard's finalizer is labelled
// olmguard.io/cleanup-tracked in the same write: the controller's cache leaves out CSVs labelled
// olm.copiedFrom but those (issue 32), and a finalized CSV it cannot see would stay terminating
// once deleted. Fails without TrackPatch: no such write is labelled.
func TestCSVHandlerTracksFinalizedCSVsLabelledAsCopies(t *testing.T) {
	labelled := map[string]string{"olm.copiedFrom": "x"}
	tracked := map[string]string{"olm.copiedFrom": "x", olmguard.CleanupTrackedLabel: "true"}
	ours := []string{olmguard.CleanupFinalizer}
	tests := []struct {
		name          string
		old, obj      []byte
		wantTracked   bool // after the patch
		wantFinalizer bool
	}{
		{"labelled while it holds the finalizer", csvJSON(t, map[string]any{"finalizers": ours}, ""),
			csvJSON(t, map[string]any{"labels": labelled, "finalizers": ours}, ""), true, true},
		{"labelled and the finalizer removed: both put on", csvJSON(t, map[string]any{"finalizers": ours}, ""),
			csvJSON(t, map[string]any{"labels": labelled}, ""), true, true},
		{"being deleted", csvJSON(t, map[string]any{"labels": labelled, "finalizers": ours}, ""),
			csvJSON(t, map[string]any{"labels": labelled, "finalizers": ours, "deletionTimestamp": "2026-11-21T10:00:00Z"}, ""), true, true},
		{"the tracking label removed", csvJSON(t, map[string]any{"labels": tracked, "finalizers": ours}, ""),
			csvJSON(t, map[string]any{"labels": labelled, "finalizers": ours}, ""), true, true},
		{"tracked already", nil, csvJSON(t, map[string]any{"labels": tracked, "finalizers": ours}, ""), true, true},
		{"OLM's copy: no finalizer", nil, csvJSON(t, map[string]any{"labels": labelled}, "Copied"), false, false},
		{"not labelled", nil, csvJSON(t, map[string]any{"finalizers": ours}, ""), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := allowedCSVUpdate(t, tt.old, tt.obj)
			patched := patchtest.Apply(t, tt.obj, r.Patches)
			var got struct {
				Metadata struct {
					Labels     map[string]string `json:"labels"`
					Finalizers []string          `json:"finalizers"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(patched, &got); err != nil {
				t.Fatal(err)
			}
			if (got.Metadata.Labels[olmguard.CleanupTrackedLabel] == "true") != tt.wantTracked {
				t.Errorf("labelled %s: %v, want %v (patch %v)", olmguard.CleanupTrackedLabel, !tt.wantTracked, tt.wantTracked, r.Patches)
			}
			if slices.Contains(got.Metadata.Finalizers, olmguard.CleanupFinalizer) != tt.wantFinalizer {
				t.Errorf("finalizers %v, want ours: %v", got.Metadata.Finalizers, tt.wantFinalizer)
			}
		})
	}
}

// allowedCSVUpdate serves an update of the CSV old to obj (old may be nil) and fails unless allowed.
func allowedCSVUpdate(t *testing.T, old, obj []byte) admission.Response {
	t.Helper()
	req := csvRequest(admissionv1.Update, obj)
	req.OldObject.Raw = old
	r := served(CSVHandler{}).Handle(context.Background(), req)
	if !r.Allowed {
		t.Fatalf("denied: %+v", r.Result)
	}
	return r
}

// FuzzCSVHandler: any body gets a well-formed answer, never a panic, and the patched CSV needs no
// further patch.
func FuzzCSVHandler(f *testing.F) {
	f.Add(byte(0), csvJSON(f, map[string]any{}, ""))
	f.Add(byte(1), csvJSON(f, map[string]any{"finalizers": []string{"operators.coreos.com/csv-cleanup"}}, ""))
	f.Add(byte(0), []byte(`{"metadata":{"finalizers":null},"status":null}`))
	f.Fuzz(func(t *testing.T, op byte, obj []byte) {
		o := []admissionv1.Operation{admissionv1.Create, admissionv1.Update}[int(op)%2]
		r := served(CSVHandler{}).Handle(context.Background(), csvRequest(o, obj))
		if !allowedOrClearlyDenied(t, r) {
			return
		}
		// The scanner skips what it does not read without checking its syntax (that is what keeps
		// large CSVs cheap). Invalid JSON never reaches the handler: the server's decoding
		// of the AdmissionReview refuses it first (FuzzReviewGuard, test/e2e/badinput_test.go).
		if len(r.Patches) == 0 || !json.Valid(obj) {
			return
		}
		patched := patchtest.Apply(t, obj, r.Patches)
		if again := served(CSVHandler{}).Handle(context.Background(), csvRequest(o, patched)); len(again.Patches) != 0 {
			t.Fatalf("not idempotent: %v", again.Patches)
		}
	})
}
