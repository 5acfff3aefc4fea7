package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/patchtest"
)

func jobRequest(op admissionv1.Operation, obj []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Namespace: "olm", Operation: op,
		Kind: metav1.GroupVersionKind{Group: "batch", Version: "v1", Kind: "Job"}, Object: runtime.RawExtension{Raw: obj}}}
}

// jobJSON is j as OLM creates it: no ttlSecondsAfterFinished.
func jobJSON(t testing.TB, j unpack.Job) []byte {
	spec := map[string]any{"backoffLimit": 3, "template": map[string]any{"spec": map[string]any{"restartPolicy": "Never"}}}
	b, err := json.Marshal(map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": j.Name, "namespace": j.Namespace, "labels": j.Labels, "ownerReferences": j.OwnerReferences}, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// catalogsIn is a CatalogSource lookup: the namespaces that hold one; err fails every lookup.
type catalogsIn struct {
	namespaces []string
	err        error
}

func (c catalogsIn) HasCatalogSource(_ context.Context, ns string) (bool, error) {
	return slices.Contains(c.namespaces, ns), c.err
}

func TestJobHandler(t *testing.T) {
	h := served(&JobHandler{TTL: 10 * time.Minute, Catalogs: catalogsIn{namespaces: []string{"olm"}}})
	j := builders.UnpackJob()
	resp := h.Handle(context.Background(), jobRequest(admissionv1.Create, jobJSON(t, j)))
	if !resp.Allowed || len(resp.Patches) != 2 {
		t.Fatalf("unpack Job: %+v", resp)
	}
	var got struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			TTL *int32 `json:"ttlSecondsAfterFinished"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(patchtest.Apply(t, jobJSON(t, j), resp.Patches), &got); err != nil {
		t.Fatal(err)
	}
	if got.Metadata.Name != unpack.ScopedName("olm", j.Name) || got.Spec.TTL == nil || *got.Spec.TTL != 600 {
		t.Fatalf("patched Job: name %q ttl %v", got.Metadata.Name, got.Spec.TTL)
	}
	if len(got.Metadata.Labels) != 2 || len(got.Metadata.OwnerReferences) != 1 {
		t.Fatalf("labels or owners changed: %+v", got.Metadata)
	}
	for name, req := range map[string]admission.Request{
		"update":          jobRequest(admissionv1.Update, jobJSON(t, j)),
		"no spec":         jobRequest(admissionv1.Create, []byte(`{"metadata":{"name":"x"}}`)),
		"malformed":       jobRequest(admissionv1.Create, []byte(`{`)),
		"ordinary job":    jobRequest(admissionv1.Create, jobJSON(t, unpack.Job{Namespace: "olm", Name: "backup"})),
		"already patched": jobRequest(admissionv1.Create, patchtest.Apply(t, jobJSON(t, j), resp.Patches)),
	} {
		r := h.Handle(context.Background(), req)
		if len(r.Patches) != 0 {
			t.Errorf("%s: patched %v", name, r.Patches)
		}
		if (name == "no spec" || name == "malformed") && (r.Allowed || r.Result.Code != http.StatusBadRequest) {
			t.Errorf("%s: %+v, want a 400", name, r.Result)
		}
	}
}

// A Job that looks like an unpack Job outside a namespace holding a CatalogSource is a tenant's:
// olmguard leaves it as written. A failed lookup admits the Job unchanged, warned and counted.
func TestJobHandlerOnlyInCatalogNamespaces(t *testing.T) {
	raw := jobJSON(t, builders.UnpackJob())
	for _, tc := range []struct {
		name        string
		catalogs    admit.CatalogNamespaces
		wantCode    int32 // 0: allowed
		patched     bool
		lookupError bool
	}{
		{"catalog namespace", catalogsIn{namespaces: []string{"olm"}}, 0, true, false},
		{"tenant namespace", catalogsIn{namespaces: []string{"openshift-marketplace"}}, 0, false, false},
		{"lookup fails", catalogsIn{err: errors.New("forbidden")}, 0, false, true},
		{"no lookup configured", nil, http.StatusInternalServerError, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter := metrics.LookupErrors.WithLabelValues(JobsWebhook)
			before := testutil.ToFloat64(counter)
			r := served(&JobHandler{TTL: time.Minute, Catalogs: tc.catalogs}).Handle(context.Background(), jobRequest(admissionv1.Create, raw))
			if got := testutil.ToFloat64(counter) - before; (got == 1) != tc.lookupError {
				t.Errorf("lookup errors increased by %v, want a count: %v", got, tc.lookupError)
			}
			if tc.lookupError && len(r.Warnings) != 1 {
				t.Errorf("warnings = %q, want one", r.Warnings)
			}
			if got := len(r.Patches) > 0; got != tc.patched {
				t.Errorf("patched=%v, want %v (%v)", got, tc.patched, r.Patches)
			}
			if tc.wantCode == 0 && !r.Allowed || tc.wantCode != 0 && (r.Allowed || r.Result.Code != tc.wantCode || r.Result.Message == "") {
				t.Errorf("response %+v, want code %d", r.Result, tc.wantCode)
			}
		})
	}
}

// FuzzJobHandler: any body gets a well-formed answer, never a panic; the patched Job needs no
// further patch.
func FuzzJobHandler(f *testing.F) {
	f.Add(jobJSON(f, builders.UnpackJob()))
	f.Add([]byte(`{"metadata":{"name":"x","labels":{"olm.managed":"true","operatorframework.io/bundle-unpack-ref":"x"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"x","uid":"u"}]},"spec":{}}`))
	f.Add([]byte(`{"metadata":{},"spec":null}`))
	f.Fuzz(func(t *testing.T, obj []byte) {
		h := served(&JobHandler{TTL: time.Minute, Catalogs: catalogsIn{namespaces: []string{"olm"}}})
		r := h.Handle(context.Background(), jobRequest(admissionv1.Create, obj))
		if !allowedOrClearlyDenied(t, r) || len(r.Patches) == 0 {
			return
		}
		patched := patchtest.Apply(t, obj, r.Patches)
		if again := h.Handle(context.Background(), jobRequest(admissionv1.Create, patched)); len(again.Patches) != 0 {
			t.Fatalf("not idempotent: %v", again.Patches)
		}
	})
}
