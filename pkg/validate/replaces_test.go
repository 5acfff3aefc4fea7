package validate

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

func replacesCSV(ns, name, replaces string, labels map[string]string) *v1alpha1.ClusterServiceVersion {
	return &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1alpha1.ClusterServiceVersionSpec{Replaces: replaces}}
}

// replacesReader holds, in namespace ns: b.v1 replacing a.v1 (so a CSV a.v1 replacing b.v1
// closes a cycle), an upgrade predecessor p.v1, a copy c.v1 replacing x.v1, and, in namespace
// other, z.v1 replacing x.v1 (a cycle if another namespace were read).
func replacesReader(t testing.TB) client.Reader {
	return fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(
		replacesCSV("ns", "b.v1", "a.v1", nil),
		replacesCSV("ns", "p.v1", "p.v0", nil),
		replacesCSV("ns", "c.v1", "x.v1", map[string]string{olm.CopiedFromLabel: "elsewhere"}),
		replacesCSV("other", "z.v1", "x.v1", nil),
	).Build()
}

func withReplacesMode(m Mode) Policies {
	p := DefaultPolicies()
	p.ReplacesCycle = m
	return p
}

func replacesHandler(r client.Reader, m Mode) admission.Handler {
	return served(&CSVReplacesHandler{CSVs: admit.LiveCSVReplaces{Reader: r}, Policies: withReplacesMode(m)})
}

// The replaces-cycle guard (OCPBUGS-23954) on CSV CREATE and on an UPDATE that changes
// spec.replaces. Fails before the fix: no handler refused or warned about a self-replacing CSV.
func TestCSVReplacesHandler(t *testing.T) {
	ctx := context.Background()
	r := replacesReader(t)
	req := func(op admissionv1.Operation, obj, old any) admission.Request {
		return request(t, "ClusterServiceVersion", op, obj, old)
	}
	self := replacesCSV("ns", "s.v1", "s.v1", nil)
	closing := replacesCSV("ns", "a.v1", "b.v1", nil)
	for _, tc := range []struct {
		name    string
		mode    Mode
		req     admission.Request
		allowed bool
		says    string // in the denial, or in a warning when allowed
	}{
		{"self, enforce", Enforce, req(admissionv1.Create, self, nil), false, "CSV s.v1 in namespace ns replaces itself"},
		{"self, warn (default)", DefaultPolicies().ReplacesCycle, req(admissionv1.Create, self, nil), true, "replaces itself"},
		{"self, off", Off, req(admissionv1.Create, self, nil), true, ""},
		{"closing a cycle, enforce", Enforce, req(admissionv1.Create, closing, nil), false, "closes a spec.replaces cycle (a.v1 replaces b.v1, b.v1 replaces a.v1)"},
		{"closing a cycle cites the bug and the recovery", Enforce, req(admissionv1.Create, closing, nil), false, "OCPBUGS-23954"},
		{"recovery", Enforce, req(admissionv1.Create, closing, nil), false, "then restart olm-operator"},
		{"normal upgrade", Enforce, req(admissionv1.Create, replacesCSV("ns", "p.v2", "p.v1", nil), nil), true, ""},
		{"first version", Enforce, req(admissionv1.Create, replacesCSV("ns", "p.v0", "", nil), nil), true, ""},
		{"a copy replacing itself is not in OLM's walk", Enforce,
			req(admissionv1.Create, replacesCSV("ns", "s.v1", "s.v1", map[string]string{olm.CopiedFromLabel: "x"}), nil), true, ""},
		{"a cycle through a copy is not OLM's", Enforce, req(admissionv1.Create, replacesCSV("ns", "x.v1", "c.v1", nil), nil), true, ""},
		{"another namespace is never read", Enforce, req(admissionv1.Create, replacesCSV("ns", "x.v1", "z.v1", nil), nil), true, ""},
		{"generated name", Enforce, req(admissionv1.Create, map[string]any{"metadata": map[string]any{"generateName": "s-", "namespace": "ns"}, "spec": map[string]any{"replaces": "s-"}}, nil), true, ""},
		{"hostile replaces", Enforce, req(admissionv1.Create, replacesCSV("ns", "h.v1", "../b.v1\x1b[2J", nil), nil), true, ""},
		{"update changing replaces into a self-reference", Enforce, req(admissionv1.Update, self, replacesCSV("ns", "s.v1", "s.v0", nil)), false, "replaces itself"},
		{"update of a CSV already in a cycle, replaces unchanged (OLM's finalizer)", Enforce, req(admissionv1.Update, self, self), true, ""},
		{"update turning a copy into a CSV of its own", Enforce,
			req(admissionv1.Update, self, replacesCSV("ns", "s.v1", "s.v1", map[string]string{olm.CopiedFromLabel: "x"})), false, "replaces itself"},
		{"update fixing a cycle", Enforce, req(admissionv1.Update, replacesCSV("ns", "s.v1", "s.v0", nil), self), true, ""},
		{"delete", Enforce, req(admissionv1.Delete, self, nil), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := replacesHandler(r, tc.mode).Handle(ctx, tc.req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if len(resp.Patches) != 0 {
				t.Fatalf("patched: %v", resp.Patches)
			}
			text := strings.Join(resp.Warnings, "\n")
			if !resp.Allowed {
				if resp.Result.Code != http.StatusForbidden {
					t.Fatalf("code %d: %+v", resp.Result.Code, resp.Result)
				}
				text = resp.Result.Message
			}
			if tc.says == "" && text != "" {
				t.Fatalf("said %q, want nothing", text)
			}
			if !strings.Contains(text, tc.says) {
				t.Fatalf("said %q, want %q", text, tc.says)
			}
			if strings.ContainsAny(text, "\x1b\n\x00") {
				t.Fatalf("unescaped control characters in %q", text)
			}
		})
	}
}

// countingCSVs answers a long chain in namespace ns: cN replaces cN+1, forever; it counts GETs
// and the namespaces asked.
type countingCSVs struct {
	gets       int
	namespaces map[string]bool
}

func (c *countingCSVs) Replaces(_ context.Context, ns, name string) (string, bool, error) {
	c.gets++
	c.namespaces[ns] = true
	return name + "x", true, nil
}

// A chain longer than the walk's bound costs a bounded number of reads and is admitted with the
// capped-lookup warning, never denied.
func TestCSVReplacesHandlerBounded(t *testing.T) {
	c := &countingCSVs{namespaces: map[string]bool{}}
	h := served(&CSVReplacesHandler{CSVs: c, Policies: withReplacesMode(Enforce)})
	resp := h.Handle(context.Background(), request(t, "ClusterServiceVersion", admissionv1.Create, replacesCSV("ns", "a", "b", nil), nil))
	if !resp.Allowed || !strings.Contains(strings.Join(resp.Warnings, " "), "replaces cycle not checked") {
		t.Fatalf("response %+v, want allowed with a warning", resp)
	}
	if c.gets > 100 || len(c.namespaces) != 1 || !c.namespaces["ns"] {
		t.Fatalf("%d reads in namespaces %v, want at most 100 in ns", c.gets, c.namespaces)
	}
}

func FuzzCSVReplacesHandler(f *testing.F) {
	f.Add(byte(0), []byte(`{"metadata":{"name":"s.v1","namespace":"ns"},"spec":{"replaces":"s.v1"}}`), []byte(nil))
	f.Add(byte(0), []byte(`{"metadata":{"name":"a.v1"},"spec":{"replaces":"b.v1"}}`), []byte(nil))
	f.Add(byte(1), []byte(`{"metadata":{"name":"s.v1"},"spec":{"replaces":"s.v1"}}`), []byte(`{"metadata":{"name":"s.v1","labels":{"olm.copiedFrom":"x"}},"spec":{"replaces":"s.v1"}}`))
	f.Add(byte(1), []byte(`{"metadata":{"name":"s.v1"},"spec":{"replaces":"s.v1"}}`), []byte(`{"metadata":{"name":"s.v1"},"spec":{"replaces":"s.v1"}}`))
	f.Add(byte(2), []byte(`{"metadata":null}`), []byte(`0`))
	f.Fuzz(func(t *testing.T, which byte, obj, old []byte) {
		op := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}[int(which)%3]
		req := request(t, "ClusterServiceVersion", op, obj, old)
		resp := replacesHandler(replacesReader(t), Enforce).Handle(context.Background(), req)
		// Only a replaces cycle may be denied.
		checkValidatingResponse(t, resp, string(op), func(msg string) bool {
			return op != admissionv1.Delete && strings.Contains(msg, "OCPBUGS-23954")
		})
	})
}
