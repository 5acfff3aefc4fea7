package mutate

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/test/patchtest"
)

const olmUser = "system:serviceaccount:olm:olm-operator-serviceaccount"

func saRequest(op admissionv1.Operation, user string, obj, old []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Namespace: "ns", Operation: op,
		UserInfo: authenticationv1.UserInfo{Username: user},
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ServiceAccount"}, Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old}}}
}

func saJSON(t testing.TB, meta map[string]any, extra map[string]any) []byte {
	meta["name"], meta["namespace"] = "op", "ns"
	body := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}
	for k, v := range extra {
		body[k] = v
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// saMeta reads the annotations, labels and imagePullSecrets of a ServiceAccount body.
func saMeta(t *testing.T, raw []byte) (annotations, labels map[string]string, pullSecrets []string) {
	t.Helper()
	var sa struct {
		Metadata struct {
			Annotations, Labels map[string]string
		}
		ImagePullSecrets []struct{ Name string }
	}
	if err := json.Unmarshal(raw, &sa); err != nil {
		t.Fatal(err)
	}
	for _, s := range sa.ImagePullSecrets {
		pullSecrets = append(pullSecrets, s.Name)
	}
	return sa.Metadata.Annotations, sa.Metadata.Labels, pullSecrets
}

// OLM's ServiceAccount step (#3607): a user's annotation, label and pull secret on the operator's
// ServiceAccount survive OLM's update; nobody else's update is changed.
// Fails before the fix: no handler served ServiceAccounts; OLM's update went through as sent.
func TestServiceAccountHandler(t *testing.T) {
	csvOwner := []any{map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "op.v2", "uid": "u2"}}
	user := func() map[string]any {
		return map[string]any{"labels": map[string]any{"olm.managed": "true", "team": "a"},
			"annotations": map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/op"}}
	}
	userExtra := map[string]any{"imagePullSecrets": []any{map[string]any{"name": "reg"}}}
	// What OLM v0.28's step leaves: its label and the new owner, nothing else.
	olmWrote := func() map[string]any {
		return map[string]any{"labels": map[string]any{"olm.managed": "true"}, "ownerReferences": csvOwner}
	}
	tests := []struct {
		name     string
		op       admissionv1.Operation
		user     string
		old, obj []byte
		restored bool
	}{
		{"OLM drops the user's metadata", admissionv1.Update, olmUser, saJSON(t, user(), userExtra), saJSON(t, olmWrote(), nil), true},
		{"OpenShift's OLM", admissionv1.Update, "system:serviceaccount:openshift-operator-lifecycle-manager:olm-operator-serviceaccount",
			saJSON(t, user(), userExtra), saJSON(t, olmWrote(), nil), true},
		{"someone else drops them", admissionv1.Update, "system:admin", saJSON(t, user(), userExtra), saJSON(t, olmWrote(), nil), false},
		{"a tenant's look-alike of OLM's name", admissionv1.Update, "system:serviceaccount:tenant:olm-operator-serviceaccount",
			saJSON(t, user(), userExtra), saJSON(t, olmWrote(), nil), false},
		{"a ServiceAccount OLM does not manage", admissionv1.Update, olmUser,
			saJSON(t, map[string]any{"annotations": map[string]any{"a": "b"}}, nil), saJSON(t, map[string]any{}, nil), false},
		{"a catalog's ServiceAccount: OLM drops a pull secret the CatalogSource no longer names", admissionv1.Update, olmUser,
			saJSON(t, map[string]any{"labels": map[string]any{"olm.managed": "true"}}, userExtra),
			saJSON(t, map[string]any{"labels": map[string]any{"olm.managed": "true"}, "ownerReferences": []any{map[string]any{
				"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource", "name": "c", "uid": "c"}}}, nil), false},
		{"nothing dropped", admissionv1.Update, olmUser, saJSON(t, user(), nil), saJSON(t, user(), nil), false},
		{"create", admissionv1.Create, olmUser, nil, saJSON(t, olmWrote(), nil), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			counter := metrics.Mutations.WithLabelValues(ServiceAccountsWebhook)
			before := testutil.ToFloat64(counter)
			r := served(&ServiceAccountHandler{}).Handle(context.Background(), saRequest(tt.op, tt.user, tt.obj, tt.old))
			if !r.Allowed {
				t.Fatalf("denied: %+v", r.Result)
			}
			if got := len(r.Patches) > 0; got != tt.restored {
				t.Fatalf("restored = %v, want %v: %v", got, tt.restored, r.Patches)
			}
			if counted := testutil.ToFloat64(counter) - before; counted != map[bool]float64{true: 1}[tt.restored] {
				t.Errorf("counted %v mutations", counted)
			}
			if !tt.restored {
				return
			}
			patched := patchtest.Apply(t, tt.obj, r.Patches)
			a, l, s := saMeta(t, patched)
			if a["eks.amazonaws.com/role-arn"] != "arn:aws:iam::1:role/op" || l["team"] != "a" || l["olm.managed"] != "true" || len(s) != 1 || s[0] != "reg" {
				t.Fatalf("after the patch: annotations %v, labels %v, pull secrets %v", a, l, s)
			}
			if again := served(&ServiceAccountHandler{}).Handle(context.Background(), saRequest(tt.op, tt.user, patched, tt.old)); len(again.Patches) != 0 {
				t.Fatalf("not idempotent: %v", again.Patches)
			}
		})
	}

	off := served(&ServiceAccountHandler{Disabled: true}).Handle(context.Background(),
		saRequest(admissionv1.Update, olmUser, saJSON(t, olmWrote(), nil), saJSON(t, user(), userExtra)))
	if !off.Allowed || len(off.Patches) != 0 {
		t.Errorf("--restore-serviceaccount-metadata=false: %+v", off)
	}
	other := served(&ServiceAccountHandler{OLMUsers: []string{"system:serviceaccount:my-olm:olm-operator-serviceaccount"}}).Handle(context.Background(),
		saRequest(admissionv1.Update, olmUser, saJSON(t, olmWrote(), nil), saJSON(t, user(), userExtra)))
	if len(other.Patches) != 0 {
		t.Errorf("--olm-users names another OLM: %v", other.Patches)
	}
	if r := served(&ServiceAccountHandler{}).Handle(context.Background(), saRequest(admissionv1.Update, olmUser, saJSON(t, olmWrote(), nil), nil)); r.Allowed || r.Result.Code != 400 {
		t.Errorf("no old object: %+v", r.Result)
	}
}

// FuzzServiceAccountHandler: any pair of bodies from any user gets a well-formed answer, never a
// panic, and the patched ServiceAccount needs no further patch.
func FuzzServiceAccountHandler(f *testing.F) {
	f.Add(true, saJSON(f, map[string]any{"labels": map[string]any{"olm.managed": "true"}, "ownerReferences": []any{map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "op.v2", "uid": "u2"}}}, nil),
		saJSON(f, map[string]any{"labels": map[string]any{"olm.managed": "true", "x": "y"}, "annotations": map[string]any{"a/b~c\u0000": "\x1b"}},
			map[string]any{"imagePullSecrets": []any{map[string]any{"name": "r"}, map[string]any{}}, "automountServiceAccountToken": false}))
	f.Add(false, []byte(`{"metadata":{"annotations":null,"labels":{}},"imagePullSecrets":null}`), []byte(`{"metadata":{}}`))
	f.Add(true, []byte(`{"metadata":{"ownerReferences":[{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion"}]},"imagePullSecrets":[]}`),
		[]byte(`{"metadata":{"annotations":{"~":"1"}},"imagePullSecrets":[{"name":"a"},{"name":"a"}]}`))
	f.Fuzz(func(t *testing.T, byOLM bool, obj, old []byte) {
		user := "system:serviceaccount:tenant:someone"
		if byOLM {
			user = olmUser
		}
		r := served(&ServiceAccountHandler{}).Handle(context.Background(), saRequest(admissionv1.Update, user, obj, old))
		if !allowedOrClearlyDenied(t, r) || len(r.Patches) == 0 {
			return
		}
		if !byOLM {
			t.Fatalf("patched another user's update: %v", r.Patches)
		}
		patched := patchtest.Apply(t, obj, r.Patches)
		if again := served(&ServiceAccountHandler{}).Handle(context.Background(), saRequest(admissionv1.Update, user, patched, old)); len(again.Patches) != 0 {
			t.Fatalf("not idempotent: %v", again.Patches)
		}
	})
}
