package mutate

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
	"github.com/olmguard/olmguard/test/patchtest"
)

func probeRequest(ns string, dryRun bool, obj []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Namespace: ns, Operation: admissionv1.Create,
		DryRun: ptr.To(dryRun), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Object: runtime.RawExtension{Raw: obj}}}
}

func probeJSON(t testing.TB, ns string) []byte {
	b, err := json.Marshal(webhookprobe.Object(ns, "n1"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWebhookProbeHandler(t *testing.T) {
	h := served(WebhookProbeHandler{Namespace: "og"})
	for _, tc := range []struct {
		name   string
		req    admission.Request
		marked bool
	}{
		{name: "the probe's dry run in olmguard's namespace", req: probeRequest("og", true, probeJSON(t, "og")), marked: true},
		{name: "stored, not a dry run", req: probeRequest("og", false, probeJSON(t, "og"))},
		{name: "a tenant's namespace", req: probeRequest("tenant", true, probeJSON(t, "tenant"))},
		{name: "a tenant's request naming olmguard's namespace in the object", req: probeRequest("tenant", true, probeJSON(t, "og"))},
		{name: "an unmarked ConfigMap", req: probeRequest("og", true, []byte(`{"metadata":{"name":"x","namespace":"og"}}`))},
		{name: "a mark that is no nonce", req: probeRequest("og", true, []byte(`{"metadata":{"name":"x","namespace":"og","labels":{"olmguard.io/webhook-probe":"\u001b[31m"}}}`))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.Handle(context.Background(), tc.req)
			if !r.Allowed || (len(r.Patches) > 0) != tc.marked {
				t.Fatalf("response allowed %v patches %v, want marked %v", r.Allowed, r.Patches, tc.marked)
			}
			if !tc.marked {
				return
			}
			var got metav1.PartialObjectMetadata
			if err := json.Unmarshal(patchtest.Apply(t, tc.req.Object.Raw, r.Patches), &got); err != nil {
				t.Fatal(err)
			}
			if res := webhookprobe.Judge("n1", got.Annotations, nil); !res.OK() {
				t.Errorf("the answer does not show the mutation: %v", got.Annotations)
			}
			if len(got.Labels) != 2 || got.Labels[olmguard.WebhookProbeLabel] != "n1" {
				t.Errorf("labels changed: %v", got.Labels)
			}
		})
	}
}

// FuzzWebhookProbeHandler: any body gets a well-formed answer, never a panic; the marked object
// needs no further patch, and nothing outside olmguard's namespace or outside a dry run is marked.
func FuzzWebhookProbeHandler(f *testing.F) {
	f.Add(probeJSON(f, "og"), "og", true)
	f.Add([]byte(`{"metadata":{"namespace":"og","labels":{"olmguard.io/webhook-probe":"a"},"annotations":{"olmguard.io/webhook-probe-answer":"b"}}}`), "og", true)
	f.Add([]byte(`{"metadata":null}`), "x", false)
	f.Fuzz(func(t *testing.T, obj []byte, ns string, dryRun bool) {
		h := served(WebhookProbeHandler{Namespace: "og"})
		r := h.Handle(context.Background(), probeRequest(ns, dryRun, obj))
		if !allowedOrClearlyDenied(t, r) || len(r.Patches) == 0 {
			return
		}
		if !dryRun {
			t.Fatalf("a request that is no dry run was marked: %v", r.Patches)
		}
		var m struct {
			Metadata struct {
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(obj, &m)
		if ns != "og" || m.Metadata.Namespace != "" && m.Metadata.Namespace != "og" {
			t.Fatalf("an object of namespace %q (request %q) was marked", m.Metadata.Namespace, ns)
		}
		patched := patchtest.Apply(t, obj, r.Patches)
		if again := h.Handle(context.Background(), probeRequest(ns, dryRun, patched)); len(again.Patches) != 0 {
			t.Fatalf("not idempotent: %v", again.Patches)
		}
	})
}
