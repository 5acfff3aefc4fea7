package mutate

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/test/patchtest"
)

type fakeSubs struct {
	subs []owners.Subscription
	err  error
}

// List serves the views as Subscriptions, and leaves out the status when asked for metadata
// only, as admit.LiveSubscriptions does.
func (f fakeSubs) List(_ context.Context, ns string, metadataOnly bool) ([]v1alpha1.Subscription, error) {
	out := make([]v1alpha1.Subscription, len(f.subs))
	for i, s := range f.subs {
		out[i].Name, out[i].Namespace, out[i].UID = s.Name, ns, s.UID
		if s.Deleting {
			out[i].DeletionTimestamp = &metav1.Time{}
		}
		if !metadataOnly && s.InstallPlanRef != "" {
			out[i].Status.InstallPlanRef = &corev1.ObjectReference{Name: s.InstallPlanRef, UID: s.InstallPlanRefUID}
		}
	}
	return out, f.err
}

// Live serves the names among the views that are not being deleted.
func (f fakeSubs) Live(_ context.Context, _ string, names []string) (map[string]types.UID, error) {
	live := map[string]types.UID{}
	for _, s := range f.subs {
		if !s.Deleting && slices.Contains(names, s.Name) {
			live[s.Name] = s.UID
		}
	}
	return live, f.err
}

// A failed lookup admits the plan unchanged, with a warning, and is counted.
func TestInstallPlanHandlerLookupFails(t *testing.T) {
	counter := metrics.LookupErrors.WithLabelValues(InstallPlansWebhook)
	before := testutil.ToFloat64(counter)
	h := served(&InstallPlanHandler{Subscriptions: fakeSubs{err: errors.New("apiserver away")}})
	resp := h.Handle(context.Background(), ipRequest(admissionv1.Create, patchtest.PlanJSON(t, nil), nil))
	if !resp.Allowed || len(resp.Patches) > 0 || len(resp.Warnings) != 1 {
		t.Errorf("response = %+v, want allowed, unchanged, one warning", resp)
	}
	if got := testutil.ToFloat64(counter) - before; got != 1 {
		t.Errorf("lookup errors of %s increased by %v, want 1", InstallPlansWebhook, got)
	}
}

var ipKind = metav1.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "InstallPlan"}

func ipRequest(op admissionv1.Operation, obj, old []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: ipKind, Namespace: "ns", Operation: op,
		Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old}}}
}

func TestInstallPlanHandler(t *testing.T) {
	a, b := owners.Subscription{Name: "a", UID: "uid-a"}, owners.Subscription{Name: "b", UID: "uid-b", InstallPlanRef: "install-1"}
	withA := []metav1.OwnerReference{owners.SubscriptionOwnerRef("a", "uid-a")}
	tests := []struct {
		name     string
		req      admission.Request
		subs     fakeSubs
		allowed  bool
		code     int32
		wantRefs []string // after applying the patch
		warnings bool
	}{
		{"create: every live Subscription", ipRequest(admissionv1.Create, patchtest.PlanJSON(t, nil), nil), fakeSubs{subs: []owners.Subscription{a, b}}, true, 0, []string{"a", "b"}, false},
		{"create: the #3199 plan gets the new Subscription", ipRequest(admissionv1.Create, patchtest.PlanJSON(t, withA), nil), fakeSubs{subs: []owners.Subscription{a, b}}, true, 0, []string{"a", "b"}, false},
		{"update dropping a live owner: restored", ipRequest(admissionv1.Update, patchtest.PlanJSON(t, nil), patchtest.PlanJSON(t, withA)), fakeSubs{subs: []owners.Subscription{a}}, true, 0, []string{"a"}, false},
		{"update: owner by installPlanRef", ipRequest(admissionv1.Update, patchtest.PlanJSON(t, withA), patchtest.PlanJSON(t, withA)), fakeSubs{subs: []owners.Subscription{a, b}}, true, 0, []string{"a", "b"}, false},
		{"lookup error: allowed unchanged with a warning", ipRequest(admissionv1.Create, patchtest.PlanJSON(t, nil), nil), fakeSubs{err: errors.New("boom")}, true, 0, nil, true},
		{"malformed body: clear error", ipRequest(admissionv1.Create, []byte(`{"metadata":`), nil), fakeSubs{}, false, http.StatusBadRequest, nil, false},
		{"empty body: clear error", ipRequest(admissionv1.Create, nil, nil), fakeSubs{}, false, http.StatusBadRequest, nil, false},
		{"malformed old object on update: clear error", ipRequest(admissionv1.Update, patchtest.PlanJSON(t, nil), []byte(`[]`)), fakeSubs{}, false, http.StatusBadRequest, nil, false},
		{"delete: allowed", ipRequest(admissionv1.Delete, nil, nil), fakeSubs{}, true, 0, nil, false},
		{"another kind: allowed untouched", admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{}`)}}}, fakeSubs{subs: []owners.Subscription{a}}, true, 0, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := served(&InstallPlanHandler{Subscriptions: tt.subs})
			resp := h.Handle(context.Background(), tt.req)
			if resp.Allowed != tt.allowed {
				t.Fatalf("allowed = %v (%v), want %v", resp.Allowed, resp.Result, tt.allowed)
			}
			if tt.code != 0 && (resp.Result == nil || resp.Result.Code != tt.code || resp.Result.Message == "") {
				t.Fatalf("result = %+v, want code %d with a message", resp.Result, tt.code)
			}
			if (len(resp.Warnings) > 0) != tt.warnings {
				t.Errorf("warnings = %v", resp.Warnings)
			}
			if tt.wantRefs == nil {
				if len(resp.Patches) != 0 {
					t.Errorf("unexpected patch %v", resp.Patches)
				}
				return
			}
			patched := patchtest.Apply(t, tt.req.Object.Raw, resp.Patches)
			var got []string
			for _, r := range patchtest.OwnerRefs(t, patched) {
				got = append(got, r.Name)
			}
			if len(got) != len(tt.wantRefs) {
				t.Fatalf("refs after patch = %v, want %v", got, tt.wantRefs)
			}
		})
	}
}

// FuzzInstallPlanHandler: any body gets a well-formed answer, never a panic, and the answer is
// idempotent: handling the patched object again yields no patch.
func FuzzInstallPlanHandler(f *testing.F) {
	f.Add(byte(0), []byte(`{"metadata":{"name":"install-1","namespace":"ns"}}`), []byte(nil))
	f.Add(byte(1), []byte(`{"metadata":{"name":"install-1","ownerReferences":[]}}`), []byte(`{"metadata":{"ownerReferences":[{"apiVersion":"operators.coreos.com/v1alpha1","kind":"Subscription","name":"a","uid":"x"}]}}`))
	f.Add(byte(0), []byte(`{"metadata":{"ownerReferences":[{"apiVersion":"operators.coreos.com/v1alpha1","kind":"Subscription","name":"b","uid":"stale"}]}}`), []byte(nil))
	f.Add(byte(1), []byte(`null`), []byte(`{}`))
	f.Add(byte(0), []byte(`{"metadata":{"ownerReferences":{}}}`), []byte(nil))
	f.Fuzz(func(t *testing.T, opByte byte, obj, old []byte) {
		op := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}[int(opByte)%4]
		h := served(&InstallPlanHandler{Subscriptions: fakeSubs{subs: []owners.Subscription{
			{Name: "a", UID: "uid-a"}, {Name: "b", UID: "uid-b", InstallPlanRef: "install-1"}, {Name: "c", UID: "uid-c", Deleting: true}}}})
		resp := h.Handle(context.Background(), ipRequest(op, obj, old))
		if !allowedOrClearlyDenied(t, resp) || len(resp.Patches) == 0 {
			return
		}
		raw, err := json.Marshal(resp.Patches)
		if err != nil {
			t.Fatal(err)
		}
		patched := patchtest.Apply(t, obj, resp.Patches)
		again := h.Handle(context.Background(), ipRequest(op, patched, old))
		if len(again.Patches) != 0 {
			t.Fatalf("not idempotent: first patch %s, second %v", raw, again.Patches)
		}
	})
}

// allowedOrClearlyDenied reports whether a fuzzed request was allowed; a denial must carry a
// clear error (a 4xx or 5xx code and a message), never be silent.
func allowedOrClearlyDenied(t *testing.T, r admission.Response) bool {
	t.Helper()
	if !r.Allowed && (r.Result == nil || r.Result.Code < 400 || r.Result.Message == "") {
		t.Fatalf("denied without a clear error: %+v", r.Result)
	}
	return r.Allowed
}
