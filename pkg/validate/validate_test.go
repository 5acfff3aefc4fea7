package validate

import (
	"context"
	"encoding/json"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

func sub(name, pkg string, approval v1alpha1.Approval) v1alpha1.Subscription {
	return v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: v1alpha1.SubscriptionSpec{Package: pkg, InstallPlanApproval: approval, CatalogSource: "c", CatalogSourceNamespace: "olm"}}
}

func TestModeSet(t *testing.T) {
	var m Mode
	for _, ok := range []string{"enforce", "warn", "off"} {
		if err := m.Set(ok); err != nil || string(m) != ok {
			t.Errorf("Set(%q) = %v", ok, err)
		}
	}
	if err := m.Set("deny"); err == nil || !strings.Contains(err.Error(), "enforce, warn or off") {
		t.Errorf("Set(deny) = %v, want a clear error", err)
	}
}

func TestSubscriptionPolicies(t *testing.T) {
	auto, manual := v1alpha1.ApprovalAutomatic, v1alpha1.ApprovalManual
	deleting := sub("old", "etcd", manual)
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name   string
		sub    v1alpha1.Subscription
		others []v1alpha1.Subscription
		want   []string // policies violated
	}{
		{"alone", sub("a", "etcd", auto), nil, nil},
		{"itself in the list is not a duplicate", sub("a", "etcd", auto), []v1alpha1.Subscription{sub("a", "etcd", auto)}, nil},
		{"same package twice", sub("b", "etcd", auto), []v1alpha1.Subscription{sub("a", "etcd", auto)}, []string{"duplicate-package"}},
		{"manual beside automatic", sub("b", "redis", manual), []v1alpha1.Subscription{sub("a", "etcd", auto)}, []string{"mixed-approval"}},
		{"empty approval is Automatic", sub("b", "redis", ""), []v1alpha1.Subscription{sub("a", "etcd", auto)}, nil},
		{"both", sub("b", "etcd", manual), []v1alpha1.Subscription{sub("a", "etcd", auto)}, []string{"duplicate-package", "mixed-approval"}},
		{"ones being deleted do not count", sub("b", "etcd", auto), []v1alpha1.Subscription{deleting}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, v := range SubscriptionPolicies(DefaultPolicies(), &tt.sub, tt.others) {
				got = append(got, v.Policy)
				if v.Mode != Warn || v.Message == "" {
					t.Errorf("violation %+v: want mode warn (default) and a message", v)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
	off := Policies{MixedApproval: Off, DuplicatePackage: Off}
	if v := SubscriptionPolicies(off, &tests[5].sub, tests[5].others); len(v) != 0 {
		t.Errorf("policies off still report %v", v)
	}
}

func ref(name, uid string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "operators.coreos.com/v1alpha1", Kind: "Subscription", Name: name, UID: types.UID(uid)}
}

func TestRespond(t *testing.T) {
	if r := Respond(context.Background(), nil); !r.Allowed || len(r.Warnings) != 0 {
		t.Errorf("no violations: %+v", r)
	}
	r := Respond(context.Background(), []Violation{{Mode: Warn, Message: "w"}, {Mode: Off, Message: "o"}})
	if !r.Allowed || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "w") {
		t.Errorf("warn: %+v", r)
	}
	r = Respond(context.Background(), []Violation{{Mode: Enforce, Message: "e"}, {Mode: Warn, Message: "w"}})
	if r.Allowed || !strings.Contains(r.Result.Message, "e") || r.Result.Code != http.StatusForbidden {
		t.Errorf("enforce: %+v", r.Result)
	}
}

// TestRespondLogsViolations: enforced and warned violations are logged with the request's logger
// (the only place a warned one is recorded beside its writer's terminal); off ones are not.
func TestRespondLogsViolations(t *testing.T) {
	var lines []string
	logger := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	ctx := log.IntoContext(context.Background(), logger.WithValues("user", "alice"))
	Respond(ctx, []Violation{{Policy: "p-enforce", Mode: Enforce, Message: "denied"}, {Policy: "p-warn", Mode: Warn, Message: "warned"},
		{Policy: "p-off", Mode: Off, Message: "ignored"}})
	got := strings.Join(lines, "\n")
	for _, want := range []string{`"policy"="p-enforce" "mode"="enforce" "message"="denied"`, `"policy"="p-warn" "mode"="warn" "message"="warned"`, `"user"="alice"`} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "p-off") || len(lines) != 2 {
		t.Errorf("want two lines, none for the policy that is off:\n%s", got)
	}
}

func scheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func request(t testing.TB, kind string, op admissionv1.Operation, obj, old any) admission.Request {
	raw := func(v any) []byte {
		if b, ok := v.([]byte); ok {
			return b
		}
		if v == nil {
			return nil
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Namespace: "ns", Operation: op,
		Kind:   metav1.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: kind},
		Object: runtime.RawExtension{Raw: raw(obj)}, OldObject: runtime.RawExtension{Raw: raw(old)}}}
}

func TestSubscriptionHandler(t *testing.T) {
	existing := sub("a", "etcd", v1alpha1.ApprovalAutomatic)
	reader := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(&existing).Build()
	p := DefaultPolicies()
	p.DuplicatePackage = Enforce
	h := served(&SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader}, Policies: p})
	dup, manual, same := sub("b", "etcd", v1alpha1.ApprovalAutomatic), sub("c", "redis", v1alpha1.ApprovalManual), sub("a", "etcd", v1alpha1.ApprovalAutomatic)

	if r := h.Handle(context.Background(), request(t, "Subscription", admissionv1.Create, dup, nil)); r.Allowed || !strings.Contains(r.Result.Message, `package "etcd"`) {
		t.Errorf("duplicate package (enforce) = %+v", r.Result)
	}
	if r := h.Handle(context.Background(), request(t, "Subscription", admissionv1.Create, manual, nil)); !r.Allowed || len(r.Warnings) != 1 {
		t.Errorf("mixed approval (warn) = %+v", r)
	}
	if r := h.Handle(context.Background(), request(t, "Subscription", admissionv1.Update, same, same)); !r.Allowed || len(r.Warnings) != 0 {
		t.Errorf("unchanged update = %+v", r)
	}
	if r := h.Handle(context.Background(), request(t, "Subscription", admissionv1.Create, []byte(`{"spec":`), nil)); r.Allowed || r.Result.Code != http.StatusBadRequest {
		t.Errorf("malformed = %+v", r.Result)
	}
}

// A failed lookup admits the object unchanged, warned, and is counted for its handler.
func TestHandlersLookupFails(t *testing.T) {
	failing := admit.LiveSubscriptions{Reader: erroringReader{}}
	ref := metav1.OwnerReference{APIVersion: "operators.coreos.com/v1alpha1", Kind: "Subscription", Name: "a", UID: "uid-a"}
	dropsA := request(t, "InstallPlan", admissionv1.Update,
		map[string]any{"metadata": map[string]any{"name": "install-1", "namespace": "ns"}},
		map[string]any{"metadata": map[string]any{"name": "install-1", "namespace": "ns", "ownerReferences": []metav1.OwnerReference{ref}}})
	p := DefaultPolicies()
	p.DuplicatePackage = Enforce
	for _, tc := range []struct {
		webhook string
		h       admission.Handler
		req     admission.Request
	}{
		{SubscriptionsWebhook, served(&SubscriptionHandler{Subscriptions: failing, Policies: p}), request(t, "Subscription", admissionv1.Create, sub("b", "etcd", ""), nil)},
		{InstallPlansWebhook, served(&InstallPlanHandler{Subscriptions: failing, Policies: p}), dropsA},
	} {
		counter := metrics.LookupErrors.WithLabelValues(tc.webhook)
		before := testutil.ToFloat64(counter)
		r := tc.h.Handle(context.Background(), tc.req)
		if !r.Allowed || len(r.Patches) > 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "policies not checked") {
			t.Errorf("%s: lookup error must admit unchanged with a warning: %+v", tc.webhook, r)
		}
		if got := testutil.ToFloat64(counter) - before; got != 1 {
			t.Errorf("%s: lookup errors increased by %v, want 1", tc.webhook, got)
		}
	}
}

type erroringReader struct{ client.Reader }

func (erroringReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return context.DeadlineExceeded
}

func (erroringReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return context.DeadlineExceeded
}

func TestInstallPlanHandler(t *testing.T) {
	a, b := sub("a", "etcd", ""), sub("b", "redis", "")
	h := served(&InstallPlanHandler{Subscriptions: admit.LiveSubscriptions{Reader: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(&a, &b).Build()}, Policies: DefaultPolicies()})
	plan := func(refs ...metav1.OwnerReference) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "install-1", "namespace": "ns", "ownerReferences": refs}}
	}
	both := plan(ref("a", "uid-a"), ref("b", "uid-b"))
	if r := h.Handle(context.Background(), request(t, "InstallPlan", admissionv1.Update, plan(ref("a", "uid-a")), both)); r.Allowed || !strings.Contains(r.Result.Message, "b") {
		t.Errorf("dropping live b = %+v", r.Result)
	}
	if r := h.Handle(context.Background(), request(t, "InstallPlan", admissionv1.Update, both, plan(ref("a", "uid-a")))); !r.Allowed {
		t.Errorf("adding an owner = %+v", r.Result)
	}
	if r := h.Handle(context.Background(), request(t, "InstallPlan", admissionv1.Update, plan(), plan(ref("gone", "uid-gone")))); !r.Allowed {
		t.Errorf("dropping a dead owner = %+v", r.Result)
	}
	if r := h.Handle(context.Background(), request(t, "InstallPlan", admissionv1.Update, []byte(`null`), both)); r.Allowed || r.Result.Code != http.StatusBadRequest {
		t.Errorf("null object = %+v", r.Result)
	}
}

// FuzzHandlers: any body gets a well-formed answer and never a panic.
func FuzzHandlers(f *testing.F) {
	f.Add(byte(0), []byte(`{"metadata":{"name":"b","namespace":"ns"},"spec":{"name":"etcd"}}`), []byte(nil))
	f.Add(byte(1), []byte(`{"metadata":{"name":"install-1","ownerReferences":[]}}`), []byte(`{"metadata":{"ownerReferences":[{"kind":"Subscription","name":"a","uid":"uid-a"}]}}`))
	f.Add(byte(2), []byte(`{"metadata":null}`), []byte(`0`))
	// A CSV labelled as a copy, removing olmguard's finalizer while deleted (issue 31 item 7).
	f.Add(byte(5), []byte(`{"metadata":{"name":"op.v1","labels":{"olm.copiedFrom":"x"},"deletionTimestamp":"2026-11-21T10:00:00Z"},"status":{"reason":"Copied"}}`),
		[]byte(`{"metadata":{"name":"op.v1","labels":{"olm.copiedFrom":"x"},"deletionTimestamp":"2026-11-21T10:00:00Z","finalizers":["olmguard.io/cleanup"]}}`))
	f.Add(byte(4), []byte(`{"metadata":{"name":"install-1","ownerReferences":[{"kind":"Subscription","name":"a","uid":"uid-a"}]},"spec":{"approved":true,"clusterServiceVersionNames":["x"]}}`), []byte(`{"metadata":{},"spec":{"approved":false}}`))
	f.Fuzz(func(t *testing.T, which byte, obj, old []byte) {
		a := sub("a", "etcd", "")
		reader := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(&a).Build()
		p := Policies{MixedApproval: Enforce, DuplicatePackage: Enforce, InstallPlanOwnerDrop: Enforce}
		p.CleanupFinalizer, p.Approval = Enforce, Enforce
		h := served(&SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader}, Policies: p})
		kind := "Subscription"
		switch which % 3 {
		case 1:
			h, kind = served(&InstallPlanHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader}, Policies: p}), "InstallPlan"
		case 2:
			h, kind = served(&CSVHandler{Policies: p}), "ClusterServiceVersion"
		}
		op := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}[int(which/3)%3]
		r := h.Handle(context.Background(), request(t, kind, op, obj, old))
		if !r.Allowed && (r.Result == nil || r.Result.Code < 400 || r.Result.Message == "") {
			t.Fatalf("denied without a clear reason: %+v", r.Result)
		}
		if len(r.Patches) != 0 {
			t.Fatalf("a validating handler patched: %v", r.Patches)
		}
	})
}

func TestPolicyFlags(t *testing.T) {
	p := DefaultPolicies()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	p.BindFlags(fs)
	if p.OperatorGroups != Warn {
		t.Errorf("--policy-operatorgroups defaults to %q, want warn", p.OperatorGroups)
	}
	if err := fs.Parse([]string{"--policy-mixed-approval=off", "--policy-duplicate-package=enforce", "--policy-operatorgroups=enforce"}); err != nil {
		t.Fatal(err)
	}
	if p.MixedApproval != Off || p.DuplicatePackage != Enforce || p.InstallPlanOwnerDrop != Enforce || p.OperatorGroups != Enforce {
		t.Errorf("parsed %+v", p)
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse([]string{"--policy-cleanup-finalizer=maybe"}); err == nil {
		t.Error("a bad mode must be a parse error")
	}
}

func TestCleanupFinalizerRemoval(t *testing.T) {
	const fin = "olmguard.io/cleanup"
	ctrlUser := DefaultCleanupUsers[0]
	tests := []struct {
		name          string
		user          string
		old, new      []string
		deleting      bool
		annotations   map[string]string
		wantViolation bool
	}{
		{"a user removes it during cleanup", "alice", []string{fin, "x"}, []string{"x"}, true, nil, true},
		{"the controller removes it", ctrlUser, []string{fin}, nil, true, nil, false},
		{"opted out", "alice", []string{fin}, nil, true, map[string]string{"olmguard.io/cleanup": "disabled"}, false},
		{"not being deleted (the mutating webhook puts it back)", "alice", []string{fin}, nil, false, nil, false},
		{"kept", "alice", []string{fin}, []string{fin, "y"}, true, nil, false},
		{"never had it", "alice", []string{"x"}, nil, true, nil, false},
	}
	for _, tt := range tests {
		v := CleanupFinalizerRemoval(DefaultPolicies(), tt.user, DefaultCleanupUsers, tt.old, tt.new, tt.deleting, tt.annotations)
		if (len(v) > 0) != tt.wantViolation {
			t.Errorf("%s: violations %v", tt.name, v)
		}
		if len(v) > 0 && (v[0].Mode != Enforce || !strings.Contains(v[0].Message, "kubectl olmguard uninstall")) {
			t.Errorf("%s: %+v, want enforce by default with a way out", tt.name, v[0])
		}
	}
	off := Policies{CleanupFinalizer: Off}
	if v := CleanupFinalizerRemoval(off, "alice", DefaultCleanupUsers, []string{fin}, nil, true, nil); len(v) != 0 {
		t.Error("mode off still reports")
	}
}

// Whether a CSV calls itself a copy plays no part: olmguard never puts its finalizer on OLM's
// copies, and OLM sets olm.copiedFrom only when it creates one, so a guarded CSV carrying the
// label was labelled by someone else (issue 31 item 7). The handler never read the label, so
// this passed before the fix too; the hole was the webhook's object selector, whose test is
// TestBuildPerWebhook and TestCleanupFinalizerGuardIgnoresCopyLabel in pkg/setup.
func TestCSVHandlerCopyLabelDoesNotDisarmTheGuard(t *testing.T) {
	h := served(&CSVHandler{Policies: DefaultPolicies()})
	copied := map[string]any{"olm.copiedFrom": "elsewhere"}
	for _, tc := range []struct {
		name     string
		old, new map[string]any
	}{
		{"labelled in the same update", nil, copied},
		{"labelled in an earlier update", copied, copied},
		{"label removed in the same update", copied, nil},
	} {
		meta := func(labels map[string]any, finalizers []string) map[string]any {
			m := map[string]any{"name": "op.v1", "namespace": "t", "deletionTimestamp": "2026-11-21T10:00:00Z", "finalizers": finalizers}
			if labels != nil {
				m["labels"] = labels
			}
			return map[string]any{"metadata": m, "status": map[string]any{"reason": "Copied"}}
		}
		req := request(t, "ClusterServiceVersion", admissionv1.Update, meta(tc.new, nil), meta(tc.old, []string{"olmguard.io/cleanup"}))
		req.UserInfo.Username = "tenant"
		if r := h.Handle(context.Background(), req); r.Allowed || r.Result.Code != http.StatusForbidden {
			t.Errorf("%s: removal allowed: %+v", tc.name, r.Result)
		}
	}
}

func TestCSVHandlerDeniesRemovalDuringCleanup(t *testing.T) {
	h := served(&CSVHandler{Policies: DefaultPolicies()})
	old := map[string]any{"metadata": map[string]any{"name": "op.v1", "deletionTimestamp": "2026-11-21T10:00:00Z", "finalizers": []string{"olmguard.io/cleanup"}}}
	now := map[string]any{"metadata": map[string]any{"name": "op.v1", "deletionTimestamp": "2026-11-21T10:00:00Z"}}
	req := request(t, "ClusterServiceVersion", admissionv1.Update, now, old)
	req.UserInfo.Username = "alice"
	if r := h.Handle(context.Background(), req); r.Allowed || r.Result.Code != http.StatusForbidden {
		t.Fatalf("removal by alice during cleanup: %+v", r.Result)
	}
	req.UserInfo.Username = DefaultCleanupUsers[0]
	if r := h.Handle(context.Background(), req); !r.Allowed {
		t.Fatalf("removal by the controller: %+v", r.Result)
	}
}

// A CatalogSource's spec.address is the writer's: the denial, the warning and the log line quote
// it with its escape sequences (ESC, OSC 8, CSI U+009B, RLO U+202E) escaped. Fails before the
// fix: Respond passed the messages on raw.
func TestRespondEscapesControlCharacters(t *testing.T) {
	const hostile = "10.0.0.1:50051\x1b]8;;http://x\x1b\\click\x1b]8;;\x1b\\\x1b[2J\u009b31m\u202e"
	var lines []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{}))
	for _, mode := range []Mode{Enforce, Warn} {
		lines = nil
		p := Policies{CatalogTrust: mode}
		v := CatalogSourcePolicies(p, TrustedCatalogs{GlobalNamespace: "olm"}, Catalog{Namespace: "tenant-a", Name: "c", SourceType: v1alpha1.SourceTypeGrpc, Address: hostile})
		if len(v) != 1 || !strings.Contains(v[0].Message, hostile) {
			t.Fatalf("%s: violations %+v", mode, v)
		}
		r := Respond(ctx, v)
		out := strings.Join(append(append([]string{r.Result.Message}, r.Warnings...), lines...), "\n")
		if !strings.Contains(out, `10.0.0.1:50051\x1b]8;;http://x\x1b\click`) || strings.ContainsAny(out, "\x1b\u009b\u202e") {
			t.Errorf("%s: answer and log:\n%q", mode, out)
		}
	}
}

// checkValidatingResponse fails a fuzz input whose response a validating endpoint must never give:
// a patch, a denial without a reason, or a denial other than a bad request (400) or the one policy
// denial the endpoint may give (403, mayDeny true for the message).
func checkValidatingResponse(t *testing.T, resp admission.Response, what string, mayDeny func(msg string) bool) {
	t.Helper()
	if len(resp.Patches) != 0 {
		t.Fatalf("a validating handler patched: %v", resp.Patches)
	}
	if resp.Allowed {
		return
	}
	if resp.Result == nil || resp.Result.Message == "" {
		t.Fatalf("denied without a reason: %+v", resp.Result)
	}
	switch resp.Result.Code {
	case http.StatusBadRequest:
	case http.StatusForbidden:
		if !mayDeny(resp.Result.Message) {
			t.Fatalf("%s denied: %q", what, resp.Result.Message)
		}
	default:
		t.Fatalf("denied with code %d: %+v", resp.Result.Code, resp.Result)
	}
}
