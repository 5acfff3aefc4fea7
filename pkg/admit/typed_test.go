package admit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/review"
)

// widget is a kind of the tests' own: the adapter knows nothing of OLM's.
type widget struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Size int `json:"size"`
}

func (w *widget) GetNamespace() string   { return w.Metadata.Namespace }
func (w *widget) SetNamespace(ns string) { w.Metadata.Namespace = ns }

func decodeWidget(raw []byte) (*widget, error) {
	w := &widget{}
	if err := review.Decode(raw, w); err != nil {
		return nil, err
	}
	return w, nil
}

var (
	widgetKind  = schema.GroupKind{Group: "example.com", Kind: "Widget"}
	widgetRules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.com"}, APIVersions: []string{"v1"}, Resources: []string{"widgets"}},
	}}
)

func widgetRequest(kind string, op admissionv1.Operation, obj, old string) admission.Request {
	raw := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Namespace: "from-request", Operation: op,
		Kind: metav1.GroupVersionKind{Group: "example.com", Version: "v1", Kind: kind}, Name: "w",
		Object: runtime.RawExtension{Raw: raw(obj)}, OldObject: runtime.RawExtension{Raw: raw(old)}}}
}

// echo answers with what the decision saw, so a test reads the adapter's work in the response.
func echo(_ context.Context, r Request[*widget]) (admission.Response, error) {
	seen := fmt.Sprintf("%s %s/%d", r.Operation, r.Object.GetNamespace(), r.Object.Size)
	if r.Old != nil {
		seen += fmt.Sprintf(" old %s/%d", r.Old.GetNamespace(), r.Old.Size)
	}
	if r.OldErr != nil {
		seen += " old unreadable: " + r.OldErr.Error()
	}
	return admission.Allowed(seen), nil
}

func TestTyped(t *testing.T) {
	const w1, w2 = `{"metadata":{"name":"w","namespace":"own"},"size":1}`, `{"metadata":{"name":"w"},"size":2}`
	for _, tc := range []struct {
		name   string
		typed  func(Typed[*widget]) Typed[*widget]
		req    admission.Request
		want   admission.Response
		decide bool // whether the decision ran
	}{
		{name: "another kind: admitted unchanged, said so",
			req: widgetRequest("Gadget", admissionv1.Create, w1, ""), want: admission.Allowed("not a Widget")},
		{name: "another group of the same kind",
			req: func() admission.Request {
				r := widgetRequest("Widget", admissionv1.Create, w1, "")
				r.Kind.Group = "example.org"
				return r
			}(), want: admission.Allowed("not a Widget")},
		{name: "an operation the rules do not send: admitted unread",
			req: widgetRequest("Widget", admissionv1.Delete, "", "garbage"), want: admission.Allowed("")},
		{name: "the policies off: admitted unread",
			typed: func(t Typed[*widget]) Typed[*widget] { t.Active = func() bool { return false }; return t },
			req:   widgetRequest("Widget", admissionv1.Create, "garbage", ""), want: admission.Allowed("")},
		{name: "the policies on: decided",
			typed: func(t Typed[*widget]) Typed[*widget] { t.Active = func() bool { return true }; return t },
			req:   widgetRequest("Widget", admissionv1.Create, w1, ""), want: admission.Allowed("CREATE own/1"), decide: true},
		{name: "an object of its own namespace keeps it",
			req: widgetRequest("Widget", admissionv1.Create, w1, ""), want: admission.Allowed("CREATE own/1"), decide: true},
		{name: "namespace fallback: the request's, to the object and the old object",
			req: widgetRequest("Widget", admissionv1.Update, w2, w2), want: admission.Allowed("UPDATE from-request/2 old from-request/2"), decide: true},
		{name: "an undecodable object: 400, named",
			req:  widgetRequest("Widget", admissionv1.Create, `{"metadata":`, ""),
			want: admission.Errored(http.StatusBadRequest, errors.New("decoding Widget: malformed object: unexpected end of JSON input"))},
		{name: "no object: 400",
			req:  widgetRequest("Widget", admissionv1.Create, "", ""),
			want: admission.Errored(http.StatusBadRequest, errors.New("decoding Widget: empty object"))},
		{name: "an undecodable old object: 400, named",
			req:  widgetRequest("Widget", admissionv1.Update, w1, `[]`),
			want: admission.Errored(http.StatusBadRequest, errors.New("decoding old Widget: malformed object: json: cannot unmarshal array into Go value of type admit.widget"))},
		{name: "an optional old object: left to the decision",
			typed: func(t Typed[*widget]) Typed[*widget] { t.OldOptional = true; return t },
			req:   widgetRequest("Widget", admissionv1.Update, w1, ""), want: admission.Allowed("UPDATE own/1 old unreadable: decoding old Widget: empty object"), decide: true},
		{name: "a create has no old object, whatever the request holds",
			req: widgetRequest("Widget", admissionv1.Create, w1, "garbage"), want: admission.Allowed("CREATE own/1"), decide: true},
		{name: "a decision's error: 500",
			typed: func(t Typed[*widget]) Typed[*widget] {
				t.Decide = func(context.Context, Request[*widget]) (admission.Response, error) {
					return admission.Response{}, errors.New("no lookup configured")
				}
				return t
			},
			req: widgetRequest("Widget", admissionv1.Create, w1, ""), want: admission.Errored(http.StatusInternalServerError, errors.New("no lookup configured")), decide: true},
		{name: "a decision's bad request: 400",
			typed: func(t Typed[*widget]) Typed[*widget] {
				t.Decide = func(context.Context, Request[*widget]) (admission.Response, error) {
					return admission.Response{}, BadRequest(fmt.Errorf("decoding Widget spec: %w", errors.New("bad")))
				}
				return t
			},
			req: widgetRequest("Widget", admissionv1.Create, w1, ""), want: admission.Errored(http.StatusBadRequest, errors.New("decoding Widget spec: bad")), decide: true},
		{name: "the optional old object's error returned: 400, as the adapter would have answered",
			typed: func(t Typed[*widget]) Typed[*widget] {
				t.OldOptional = true
				t.Decide = func(_ context.Context, r Request[*widget]) (admission.Response, error) {
					return admission.Response{}, r.OldErr
				}
				return t
			},
			req: widgetRequest("Widget", admissionv1.Update, w1, "{"), want: admission.Errored(http.StatusBadRequest, errors.New("decoding old Widget: malformed object: unexpected end of JSON input")), decide: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decided := false
			typed := Typed[*widget]{Kind: widgetKind, Decode: decodeWidget, Decide: echo}
			if tc.typed != nil {
				typed = tc.typed(typed)
			}
			decide := typed.Decide
			typed.Decide = func(ctx context.Context, r Request[*widget]) (admission.Response, error) {
				decided = true
				return decide(ctx, r)
			}
			h, err := typed.For(widgetRules)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, h.Handle(context.Background(), tc.req)); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			if decided != tc.decide {
				t.Errorf("decision ran: %v, want %v", decided, tc.decide)
			}
		})
	}
}

// A panic in a decision is the fail-open policy's: Serve admits the request unchanged, warned
// and counted as an error.
func TestTypedPanicFailsOpen(t *testing.T) {
	h, err := Typed[*widget]{Kind: widgetKind, Decode: decodeWidget, Decide: func(_ context.Context, r Request[*widget]) (admission.Response, error) {
		var m map[string]int
		m[r.Object.Metadata.Name]++ //nolint:staticcheck // a nil map, on purpose: the decision panics
		return admission.Allowed(""), nil
	}}.For(widgetRules)
	if err != nil {
		t.Fatal(err)
	}
	counter := metrics.WebhookRequests.WithLabelValues("/widgets", ResultError)
	before := testutil.ToFloat64(counter)
	resp := Serve("/widgets", h).Handle(context.Background(), widgetRequest("Widget", admissionv1.Create, `{"metadata":{"name":"w"}}`, ""))
	if !resp.Allowed || len(resp.Patches) != 0 || len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], "olmguard /widgets failed, request admitted unchanged: panic: assignment to entry in nil map") {
		t.Errorf("response = %+v, want admitted unchanged with the panic's warning", resp)
	}
	if got := testutil.ToFloat64(counter) - before; got != 1 {
		t.Errorf("errors counted: %v, want 1", got)
	}
	// And an error answer the same way: admitted, warned.
	h, _ = Typed[*widget]{Kind: widgetKind, Decode: decodeWidget, Decide: echo}.For(widgetRules)
	resp = Serve("/widgets", h).Handle(context.Background(), widgetRequest("Widget", admissionv1.Create, `{`, ""))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "decoding Widget: malformed object") {
		t.Errorf("response = %+v, want admitted with the decoding error's warning", resp)
	}
}

// The operations come from the endpoint's rules; rules the decision cannot serve fail at start.
func TestTypedFor(t *testing.T) {
	rules := func(group string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: []string{group}}}}
	}
	typed := Typed[*widget]{Kind: widgetKind, Decode: decodeWidget, Decide: echo}
	for _, tc := range []struct {
		name    string
		typed   Typed[*widget]
		rules   []admissionregistrationv1.RuleWithOperations
		wantErr string
		handled []admissionv1.Operation // operations that reach the decision
	}{
		{"update only", typed, rules("example.com", admissionregistrationv1.Update), "", []admissionv1.Operation{admissionv1.Update}},
		{"every operation", typed, rules("*", admissionregistrationv1.OperationAll), "", []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}},
		{"two rules", typed, append(rules("example.com", admissionregistrationv1.Create), rules("example.com", admissionregistrationv1.Delete)...), "",
			[]admissionv1.Operation{admissionv1.Create, admissionv1.Delete}},
		{"no operation", typed, rules("example.com"), "send no operation", nil},
		{"another group", typed, rules("example.org", admissionregistrationv1.Create), `no object of group "example.com"`, nil},
		{"no rules", typed, nil, "send no operation", nil},
		{"no decision", Typed[*widget]{Kind: widgetKind, Decode: decodeWidget}, rules("example.com", admissionregistrationv1.Create), "are required", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := tc.typed.For(tc.rules)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("For = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var handled []admissionv1.Operation
			for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect} {
				const w = `{"metadata":{"name":"w"}}`
				if r := h.Handle(context.Background(), widgetRequest("Widget", op, w, w)); r.Result.Message != "" {
					handled = append(handled, op)
				}
			}
			if diff := cmp.Diff(tc.handled, handled); diff != "" {
				t.Errorf("operations decided (-want +got):\n%s", diff)
			}
		})
	}
}
