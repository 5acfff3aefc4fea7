package validate

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	v1 "github.com/olmguard/olmguard/pkg/olm/v1"
)

func meta(name string, deleting bool) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: "ns"}
	if deleting {
		m.DeletionTimestamp = &metav1.Time{}
	}
	return m
}

func withMode(m Mode) Policies {
	p := DefaultPolicies()
	p.OperatorGroups = m
	return p
}

func TestOperatorGroupPolicies(t *testing.T) {
	type want struct{ policy, mode, says string }
	tests := []struct {
		name    string
		mode    Mode
		others  []metav1.ObjectMeta
		missing []string
		want    []want
	}{
		{"alone", Enforce, nil, nil, nil},
		{"itself in the list is not a second one", Enforce, []metav1.ObjectMeta{meta("og", false)}, nil, nil},
		{"second, enforce", Enforce, []metav1.ObjectMeta{meta("first", false)}, nil,
			[]want{{SecondOperatorGroupPolicy, "enforce", "namespace ns already has OperatorGroup first"}}},
		{"second, warn", Warn, []metav1.ObjectMeta{meta("first", false), meta("og", false)}, nil,
			[]want{{SecondOperatorGroupPolicy, "warn", "TooManyOperatorGroups"}}},
		{"every existing one is named", Warn, []metav1.ObjectMeta{meta("z", false), meta("b", false)}, nil,
			[]want{{SecondOperatorGroupPolicy, "warn", "OperatorGroup b, z"}}},
		{"one being deleted does not count", Enforce, []metav1.ObjectMeta{meta("first", true)}, nil, nil},
		{"missing targets are a warning in enforce", Enforce, nil, []string{"tenant-a", "tenant-b"},
			[]want{{MissingTargetNamespacePolicy, "warn", "targets namespaces that do not exist: tenant-a, tenant-b"}}},
		{"both", Enforce, []metav1.ObjectMeta{meta("first", false)}, []string{"gone"},
			[]want{{SecondOperatorGroupPolicy, "enforce", "first"}, {MissingTargetNamespacePolicy, "warn", "gone"}}},
		{"off reports nothing", Off, []metav1.ObjectMeta{meta("first", false)}, []string{"gone"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []want
			for _, v := range OperatorGroupPolicies(withMode(tt.mode), "og", "ns", tt.others, tt.missing) {
				got = append(got, want{v.Policy, string(v.Mode), v.Message})
			}
			if len(got) != len(tt.want) {
				t.Fatalf("violations %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i].policy != tt.want[i].policy || got[i].mode != tt.want[i].mode || !strings.Contains(got[i].says, tt.want[i].says) {
					t.Errorf("violation %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestSubscriptionWithoutOperatorGroup(t *testing.T) {
	s := sub("etcd", "etcd", "")
	for _, tt := range []struct {
		name   string
		mode   Mode
		groups []metav1.ObjectMeta
		warn   bool
	}{
		{"no OperatorGroup", Warn, nil, true},
		{"no OperatorGroup, enforce still only warns", Enforce, nil, true},
		{"only one being deleted", Warn, []metav1.ObjectMeta{meta("og", true)}, true},
		{"one OperatorGroup", Warn, []metav1.ObjectMeta{meta("og", false)}, false},
		{"two OperatorGroups (the other check's business)", Warn, []metav1.ObjectMeta{meta("a", false), meta("b", false)}, false},
		{"off", Off, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := SubscriptionWithoutOperatorGroup(withMode(tt.mode), &s, tt.groups)
			if (len(v) > 0) != tt.warn {
				t.Fatalf("violations %+v, want a warning: %v", v, tt.warn)
			}
			if tt.warn && (v[0].Policy != NoOperatorGroupPolicy || v[0].Mode != Warn ||
				!strings.Contains(v[0].Message, "namespace ns has no OperatorGroup") || !strings.Contains(v[0].Message, "create one OperatorGroup in namespace ns")) {
				t.Errorf("violation %+v, want a warning naming the namespace and the fix", v[0])
			}
		})
	}
}

func TestRespondCountsViolations(t *testing.T) {
	enforced := metrics.PolicyViolations.WithLabelValues("test-policy", "enforce")
	warned := metrics.PolicyViolations.WithLabelValues("test-policy", "warn")
	off := metrics.PolicyViolations.WithLabelValues("test-policy", "off")
	e, w, o := testutil.ToFloat64(enforced), testutil.ToFloat64(warned), testutil.ToFloat64(off)
	Respond(context.Background(), []Violation{{Policy: "test-policy", Mode: Enforce, Message: "e"}, {Policy: "test-policy", Mode: Warn, Message: "w"},
		{Policy: "test-policy", Mode: Warn, Message: "w2"}, {Policy: "test-policy", Mode: Off, Message: "o"}})
	if got := []float64{testutil.ToFloat64(enforced) - e, testutil.ToFloat64(warned) - w, testutil.ToFloat64(off) - o}; !cmp.Equal(got, []float64{1, 2, 0}) {
		t.Errorf("counted enforce, warn, off = %v, want [1 2 0]", got)
	}
}

func ogScheme(t testing.TB) *runtime.Scheme {
	s := scheme(t)
	if err := v1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func operatorGroup(name string, targets ...string) *v1.OperatorGroup {
	return &v1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Spec: v1.OperatorGroupSpec{TargetNamespaces: targets}}
}

func ogRequest(t testing.TB, op admissionv1.Operation, obj, old any) admission.Request {
	r := request(t, "OperatorGroup", op, obj, old)
	r.Kind.Version = "v1"
	return r
}

// ogReader holds namespace ns with OperatorGroup first, and namespace tenant-a.
func ogReader(t testing.TB) client.Reader {
	return fake.NewClientBuilder().WithScheme(ogScheme(t)).WithObjects(operatorGroup("first"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}).Build()
}

func ogHandler(r client.Reader, m Mode) admission.Handler {
	return served(&OperatorGroupHandler{OperatorGroups: admit.LiveOperatorGroups{Reader: r}, Namespaces: admit.LiveNamespaces{Reader: r}, Policies: withMode(m)})
}

func TestOperatorGroupHandler(t *testing.T) {
	ctx := context.Background()
	r := ogReader(t)
	second, fine := operatorGroup("second", "tenant-a"), operatorGroup("first", "tenant-a")
	typo, secondTypo := operatorGroup("first", "tenant-a", "tennant-b", "tennant-b"), operatorGroup("second", "tennant-b")
	for _, tc := range []struct {
		name     string
		mode     Mode
		req      admission.Request
		allowed  bool
		code     int32
		warnings []string
	}{
		{"second, enforce", Enforce, ogRequest(t, admissionv1.Create, second, nil), false, http.StatusForbidden, nil},
		{"second, warn", Warn, ogRequest(t, admissionv1.Create, second, nil), true, 0, []string{"namespace ns already has OperatorGroup first"}},
		{"second, off", Off, ogRequest(t, admissionv1.Create, second, nil), true, 0, nil},
		{"a generated name", Enforce, ogRequest(t, admissionv1.Create, map[string]any{"metadata": map[string]any{"generateName": "og-", "namespace": "ns"}}, nil), false, http.StatusForbidden, nil},
		{"the first one updated", Enforce, ogRequest(t, admissionv1.Update, operatorGroup("first"), fine), true, 0, nil},
		{"second with a missing target: denied, and warned", Enforce, ogRequest(t, admissionv1.Create, secondTypo, nil), false, http.StatusForbidden, []string{"do not exist: tennant-b;"}},
		{"missing target on update, named once", Enforce, ogRequest(t, admissionv1.Update, typo, fine), true, 0, []string{"do not exist: tennant-b;"}},
		{"update keeping the targets is not looked at", Enforce, ogRequest(t, admissionv1.Update, typo, typo), true, 0, nil},
		{"delete", Enforce, ogRequest(t, admissionv1.Delete, nil, second), true, 0, nil},
		{"malformed", Enforce, ogRequest(t, admissionv1.Create, []byte(`{"spec":`), nil), false, http.StatusBadRequest, nil},
		{"not an OperatorGroup", Enforce, request(t, "Subscription", admissionv1.Create, second, nil), true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := ogHandler(r, tc.mode).Handle(ctx, tc.req)
			if resp.Allowed != tc.allowed || (!tc.allowed && resp.Result.Code != tc.code) {
				t.Fatalf("allowed %v (%+v), want %v with code %d", resp.Allowed, resp.Result, tc.allowed, tc.code)
			}
			if tc.code == http.StatusForbidden && !strings.Contains(resp.Result.Message, "already has OperatorGroup first") {
				t.Errorf("denial %q does not name the existing OperatorGroup", resp.Result.Message)
			}
			if len(resp.Warnings) != len(tc.warnings) {
				t.Fatalf("warnings %q, want %q", resp.Warnings, tc.warnings)
			}
			for i, w := range tc.warnings {
				if !strings.Contains(resp.Warnings[i], w) {
					t.Errorf("warning %q, want one containing %q", resp.Warnings[i], w)
				}
			}
		})
	}
}

func TestSubscriptionHandlerOperatorGroup(t *testing.T) {
	ctx := context.Background()
	s := sub("etcd", "etcd", "")
	empty := fake.NewClientBuilder().WithScheme(ogScheme(t)).Build()
	for _, tc := range []struct {
		name   string
		reader client.Reader
		op     admissionv1.Operation
		mode   Mode
		warn   bool
	}{
		{"create without an OperatorGroup", empty, admissionv1.Create, Warn, true},
		{"create without an OperatorGroup, enforce", empty, admissionv1.Create, Enforce, true},
		{"create with one", ogReader(t), admissionv1.Create, Enforce, false},
		{"off", empty, admissionv1.Create, Off, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := served(&SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: tc.reader}, OperatorGroups: admit.LiveOperatorGroups{Reader: tc.reader}, Policies: withMode(tc.mode)})
			resp := h.Handle(ctx, request(t, "Subscription", tc.op, s, nil))
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if got := len(resp.Warnings) == 1 && strings.Contains(resp.Warnings[0], "namespace ns has no OperatorGroup"); got != tc.warn || (!tc.warn && len(resp.Warnings) > 0) {
				t.Errorf("warnings %q, want the no-OperatorGroup warning: %v", resp.Warnings, tc.warn)
			}
		})
	}
}

func TestTargetNames(t *testing.T) {
	if got := targetNames([]string{"b", "", "a", "b", "c", "a"}); !cmp.Equal(got, []string{"b", "a", "c"}) {
		t.Errorf("targetNames = %v, want the distinct non-empty names in order", got)
	}
	many := make([]string, 3*maxTargetLookups)
	for i := range many {
		many[i] = fmt.Sprintf("ns-%d", i)
	}
	if got := targetNames(many); len(got) != maxTargetLookups || got[0] != "ns-0" {
		t.Errorf("targetNames of %d names gave %d, want the first %d", len(many), len(got), maxTargetLookups)
	}
}

// failingOperatorGroups fails the OperatorGroup (List) or the Namespace (Get) lookup.
type failingOperatorGroups struct {
	client.Reader
	list, get bool
}

func (f failingOperatorGroups) List(ctx context.Context, l client.ObjectList, o ...client.ListOption) error {
	if m, ok := l.(*metav1.PartialObjectMetadataList); f.list && ok && m.GroupVersionKind().Kind == "OperatorGroupList" {
		return context.DeadlineExceeded
	}
	return f.Reader.List(ctx, l, o...)
}

func (f failingOperatorGroups) Get(ctx context.Context, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if f.get {
		return context.DeadlineExceeded
	}
	return f.Reader.Get(ctx, k, o, opts...)
}

// A failed lookup admits unchanged with a warning and is counted, like every handler's; what
// the other lookups found still stands.
func TestOperatorGroupLookupsFailOpen(t *testing.T) {
	ctx := context.Background()
	s := sub("etcd", "etcd", "")
	dup := sub("etcd2", "etcd", "")
	p := withMode(Enforce)
	p.DuplicatePackage = Enforce
	for _, tc := range []struct {
		name, webhook string
		h             admission.Handler
		req           admission.Request
		allowed       bool
		warning       string
	}{
		{"OperatorGroups of a new OperatorGroup", OperatorGroupsWebhook, ogHandler(failingOperatorGroups{Reader: ogReader(t), list: true}, Enforce),
			ogRequest(t, admissionv1.Create, operatorGroup("second", "gone"), nil), true, "could not list OperatorGroups, OperatorGroup checks not done"},
		{"target Namespaces; the second OperatorGroup is still denied", OperatorGroupsWebhook, ogHandler(failingOperatorGroups{Reader: ogReader(t), get: true}, Enforce),
			ogRequest(t, admissionv1.Create, operatorGroup("second", "gone"), nil), false, "target namespaces not checked"},
		{"OperatorGroups of a new Subscription", SubscriptionsWebhook, served(&SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: ogReader(t)},
			OperatorGroups: admit.LiveOperatorGroups{Reader: failingOperatorGroups{Reader: ogReader(t), list: true}}, Policies: p}),
			request(t, "Subscription", admissionv1.Create, s, nil), true, "OperatorGroup checks not done"},
		{"OperatorGroups of a duplicate Subscription: still denied", SubscriptionsWebhook, served(&SubscriptionHandler{
			Subscriptions:  admit.LiveSubscriptions{Reader: fake.NewClientBuilder().WithScheme(ogScheme(t)).WithObjects(&s).Build()},
			OperatorGroups: admit.LiveOperatorGroups{Reader: failingOperatorGroups{Reader: ogReader(t), list: true}}, Policies: p}),
			request(t, "Subscription", admissionv1.Create, dup, nil), false, "OperatorGroup checks not done"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter := metrics.LookupErrors.WithLabelValues(tc.webhook)
			before := testutil.ToFloat64(counter)
			resp := tc.h.Handle(ctx, tc.req)
			if resp.Allowed != tc.allowed || len(resp.Patches) > 0 {
				t.Errorf("allowed %v (%+v), want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if !strings.Contains(strings.Join(resp.Warnings, "\n"), tc.warning) {
				t.Errorf("warnings %q, want one containing %q", resp.Warnings, tc.warning)
			}
			if got := testutil.ToFloat64(counter) - before; got != 1 {
				t.Errorf("lookup errors of %s increased by %v, want 1", tc.webhook, got)
			}
		})
	}
}

// FuzzOperatorGroupHandler: any body gets a well-formed answer and never a panic; the only
// denial (besides a malformed body) is a second OperatorGroup's, on a create.
func FuzzOperatorGroupHandler(f *testing.F) {
	f.Add(byte(0), []byte(`{"metadata":{"name":"second","namespace":"ns"},"spec":{"targetNamespaces":["ns","gone",""]}}`), []byte(nil))
	f.Add(byte(1), []byte(`{"metadata":{"name":"first"},"spec":{"targetNamespaces":["x"]}}`), []byte(`{"metadata":{"name":"first"},"spec":{}}`))
	f.Add(byte(3), []byte(`{"metadata":{"name":"s","namespace":"ns"},"spec":{"name":"etcd"}}`), []byte(nil))
	f.Add(byte(2), []byte(`{"metadata":null}`), []byte(`0`))
	f.Fuzz(func(t *testing.T, which byte, obj, old []byte) {
		r := ogReader(t)
		h := ogHandler(r, Enforce)
		kind := "OperatorGroup"
		if which&1 == 1 && which&2 == 2 {
			h = served(&SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: r}, OperatorGroups: admit.LiveOperatorGroups{Reader: r}, Policies: withMode(Enforce)})
			kind = "Subscription"
		}
		op := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}[int(which/4)%3]
		req := ogRequest(t, op, obj, old)
		req.Kind.Kind = kind
		resp := h.Handle(context.Background(), req)
		// Only a second OperatorGroup's create may be denied.
		checkValidatingResponse(t, resp, string(op)+" "+kind, func(msg string) bool {
			return kind == "OperatorGroup" && op == admissionv1.Create && strings.Contains(msg, "already has OperatorGroup first")
		})
	})
}
