package validate

import (
	"context"
	"flag"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// trusted is the allowlist of these tests: the global namespace olm, namespace platform, and
// images under registry.example.com/catalogs.
var trusted = TrustedCatalogs{GlobalNamespace: "olm", Namespaces: []string{"platform"}, Registries: []string{"registry.example.com/catalogs/"}}

func catalogTrustMode(m Mode) Policies {
	p := DefaultPolicies()
	p.CatalogTrust = m
	return p
}

func TestImageTrusted(t *testing.T) {
	for _, tc := range []struct {
		registries []string
		image      string
		want       bool
	}{
		{[]string{"registry.example.com"}, "registry.example.com/x/catalog:v1", true},
		{[]string{"registry.example.com/"}, "registry.example.com/catalog@sha256:abc", true},
		{[]string{"registry.example.com"}, "registry.example.com.evil.io/x/catalog:v1", false},
		{[]string{"registry.example.com"}, "registry.example.com:5000/x/catalog:v1", false},
		{[]string{"registry.example.com:5000"}, "registry.example.com:5000/x/catalog:v1", true},
		{[]string{"registry.example.com/team"}, "registry.example.com/teamx/catalog:v1", false},
		{[]string{"registry.example.com/team"}, "registry.example.com/team/catalog:v1", true},
		{[]string{"registry.example.com/team"}, "registry.example.com/team:v1", true},
		{[]string{"registry.example.com/team"}, "registry.example.com/team@sha256:abc", true},
		{[]string{"registry.example.com"}, "evil.io/registry.example.com/catalog:v1", false},
		{[]string{"registry.example.com"}, "registry.example.com", false}, // a host is not an image
		{[]string{"docker.io/library"}, "busybox", false},                 // written as pulled, not normalised
		{nil, "registry.example.com/catalog:v1", false},
		{[]string{"registry.example.com"}, "", false},
		{[]string{"/"}, "/x", false},
		{[]string{"localhost:5000"}, "localhost:5000/catalog:v1", true},
		{[]string{"localhost"}, "localhost/catalog:v1", true},
		{[]string{"docker.io/org"}, "org/catalog:v1", false}, // Docker Hub's, but not written so
		{[]string{"docker.io/org"}, "docker.io/org/catalog:v1", true},
	} {
		if got := (TrustedCatalogs{Registries: tc.registries}).ImageTrusted(tc.image); got != tc.want {
			t.Errorf("registries %q, image %q: trusted %v, want %v", tc.registries, tc.image, got, tc.want)
		}
	}
}

func TestCatalogSourcePolicies(t *testing.T) {
	grpc, cm := v1alpha1.SourceTypeGrpc, v1alpha1.SourceTypeConfigmap
	good := "registry.example.com/catalogs/ops:v1"
	for _, tc := range []struct {
		name string
		mode Mode
		c    Catalog
		want string // part of the message; "" for no violation
	}{
		{"global namespace, any address", Enforce, Catalog{"olm", "c", grpc, "", "10.0.0.1:50051"}, ""},
		{"trusted namespace, any image", Enforce, Catalog{"platform", "c", grpc, "quay.io/any/catalog:v1", ""}, ""},
		{"trusted namespace, configmap", Enforce, Catalog{"platform", "c", cm, "", ""}, ""},
		{"tenant, image from a trusted registry", Enforce, Catalog{"tenant", "c", grpc, good, ""}, ""},
		{"tenant, address", Enforce, Catalog{"tenant", "c", grpc, "", "evil.tenant.svc:50051"}, "spec.address evil.tenant.svc:50051 is served by whoever runs it"},
		{"tenant, trusted image but an address too: OLM connects to the address", Enforce, Catalog{"tenant", "c", grpc, good, "evil:50051"}, "spec.address evil:50051"},
		{"tenant, configmap", Enforce, Catalog{"tenant", "c", cm, "", ""}, `a "configmap" catalog serves whatever its namespace holds`},
		{"tenant, internal", Enforce, Catalog{"tenant", "c", v1alpha1.SourceTypeInternal, "", ""}, `"internal" catalog`},
		{"tenant, no sourceType", Enforce, Catalog{"tenant", "c", "", good, ""}, `a "" catalog`},
		{"tenant, untrusted image", Enforce, Catalog{"tenant", "c", grpc, "quay.io/evil/catalog:v1", ""}, "image quay.io/evil/catalog:v1 is not under a trusted registry (registry.example.com/catalogs/)"},
		{"tenant, look-alike registry", Enforce, Catalog{"tenant", "c", grpc, "registry.example.com/catalogsx/ops:v1", ""}, "is not under a trusted registry"},
		{"tenant, neither image nor address", Enforce, Catalog{"tenant", "c", grpc, "", ""}, "namespace tenant is not a trusted catalog namespace (trusted: olm, platform)"},
		{"warn", Warn, Catalog{"tenant", "c", cm, "", ""}, "not trusted"},
		{"off", Off, Catalog{"tenant", "c", cm, "", ""}, ""},
		{"unset mode is off", "", Catalog{"tenant", "c", cm, "", ""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CatalogSourcePolicies(catalogTrustMode(tc.mode), trusted, tc.c)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("violations %+v, want none", got)
				}
				return
			}
			if len(got) != 1 || got[0].Policy != UntrustedCatalogPolicy || got[0].Mode != tc.mode || !strings.Contains(got[0].Message, tc.want) ||
				!strings.Contains(got[0].Message, "CatalogSource "+tc.c.Namespace+"/c is not trusted") || !strings.Contains(got[0].Message, "OLM #3820") ||
				!strings.Contains(got[0].Message, "--trusted-catalog-namespaces") || !strings.Contains(got[0].Message, "--policy-catalog-trust") {
				t.Fatalf("violations %+v, want one %s (%s) saying %q", got, UntrustedCatalogPolicy, tc.mode, tc.want)
			}
		})
	}
	if got := CatalogSourcePolicies(catalogTrustMode(Enforce), TrustedCatalogs{GlobalNamespace: "olm"}, Catalog{"tenant", "c", grpc, good, ""}); len(got) != 1 ||
		!strings.Contains(got[0].Message, "no registry is trusted") {
		t.Errorf("no registries: %+v, want the image untrusted", got)
	}
}

// subTo is Subscription s in namespace tenant, for package evil from the catalog given.
func subTo(sourceNS, source string) *v1alpha1.Subscription {
	s := sub("s", "evil", "")
	s.Namespace = "tenant"
	s.Spec.CatalogSourceNamespace, s.Spec.CatalogSource = sourceNS, source
	return &s
}

func TestSubscriptionCatalogPolicies(t *testing.T) {
	grpc := v1alpha1.SourceTypeGrpc
	for _, tc := range []struct {
		name    string
		sub     *v1alpha1.Subscription
		catalog *Catalog
		want    string
	}{
		{"global catalog", subTo("olm", "operatorhubio"), nil, ""},
		{"trusted namespace, even if missing", subTo("platform", "later"), nil, ""},
		{"tenant catalog from a trusted registry", subTo("tenant", "c"), &Catalog{"tenant", "c", grpc, "registry.example.com/catalogs/ops:v1", ""}, ""},
		{"tenant catalog at an address", subTo("tenant", "c"), &Catalog{"tenant", "c", grpc, "", "evil:50051"},
			"Subscription tenant/s installs from CatalogSource tenant/c, which is not trusted to serve operators: namespace tenant is not a trusted catalog namespace"},
		{"missing tenant catalog", subTo("tenant", "c"), nil, "it does not exist and namespace tenant is not a trusted catalog namespace"},
		{"empty sourceNamespace is the Subscription's", subTo("", "c"), nil, "CatalogSource tenant/c"},
		{"another tenant's catalog", subTo("other", "c"), &Catalog{"other", "c", v1alpha1.SourceTypeConfigmap, "", ""}, "CatalogSource other/c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, m := range []Mode{Enforce, Warn, Off} {
				got := SubscriptionCatalogPolicies(catalogTrustMode(m), trusted, tc.sub, tc.catalog)
				if tc.want == "" || m == Off {
					if len(got) != 0 {
						t.Fatalf("%s: violations %+v, want none", m, got)
					}
					continue
				}
				if len(got) != 1 || got[0].Policy != UntrustedCatalogSubscriptionPolicy || got[0].Mode != m || !strings.Contains(got[0].Message, tc.want) ||
					!strings.Contains(got[0].Message, "--trusted-catalog-registries") {
					t.Fatalf("%s: violations %+v, want one saying %q", m, got, tc.want)
				}
			}
		})
	}
}

func TestTrustedCatalogFlags(t *testing.T) {
	parse := func(args ...string) (TrustedCatalogs, error) {
		tc := DefaultTrustedCatalogs()
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(nopWriter{})
		tc.BindFlags(fs)
		return tc, fs.Parse(args)
	}
	tc, err := parse()
	if err != nil || tc.GlobalNamespace != "olm" || tc.Namespaces != nil || tc.Registries != nil {
		t.Fatalf("defaults: %+v, %v", tc, err)
	}
	tc, err = parse("--global-catalog-namespace=openshift-marketplace", "--trusted-catalog-namespaces=platform, team-a,",
		"--trusted-catalog-registries=registry.example.com/catalogs/,quay.io:443/org")
	want := TrustedCatalogs{GlobalNamespace: "openshift-marketplace", Namespaces: []string{"platform", "team-a"}, Registries: []string{"registry.example.com/catalogs/", "quay.io:443/org"}}
	if err != nil || !cmp.Equal(tc, want) {
		t.Fatalf("parsed %+v, %v; want %+v", tc, err, want)
	}
	for _, bad := range []string{"--global-catalog-namespace=", "--global-catalog-namespace=Not_OK", "--trusted-catalog-namespaces=ok,Not_OK",
		"--trusted-catalog-registries=https://registry.example.com", "--trusted-catalog-registries=registry.example.com/*",
		"--trusted-catalog-registries=registry.example.com/x:v1", "--trusted-catalog-registries=registry.example.com/x@sha256:abc",
		"--trusted-catalog-registries=/x", "--trusted-catalog-registries=:5000/x", "--trusted-catalog-registries=org/catalogs"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	p := DefaultPolicies()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	p.BindFlags(fs)
	if p.CatalogTrust != Off {
		t.Errorf("--policy-catalog-trust defaults to %q, want off", p.CatalogTrust)
	}
	if err := fs.Parse([]string{"--policy-catalog-trust=enforce"}); err != nil || p.CatalogTrust != Enforce {
		t.Errorf("--policy-catalog-trust=enforce: %q, %v", p.CatalogTrust, err)
	}
}

type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }

func catalogSource(ns, name string, spec map[string]any) map[string]any {
	return map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec}
}

func TestCatalogSourceHandler(t *testing.T) {
	ctx := context.Background()
	ch := &CatalogSourceHandler{Trusted: trusted, Policies: catalogTrustMode(Enforce)}
	h := served(ch)
	evil := catalogSource("tenant", "evil", map[string]any{"sourceType": "grpc", "address": "evil:50051"})
	good := catalogSource("tenant", "good", map[string]any{"sourceType": "grpc", "image": "registry.example.com/catalogs/ops:v1"})
	repointed := catalogSource("tenant", "good", map[string]any{"sourceType": "grpc", "image": "registry.example.com/catalogs/ops:v1", "address": "evil:50051"})
	relabelled := catalogSource("tenant", "evil", map[string]any{"sourceType": "grpc", "address": "evil:50051"})
	relabelled["metadata"].(map[string]any)["labels"] = map[string]string{"touched": "yes"}
	req := func(op admissionv1.Operation, obj, old any) admission.Request {
		return request(t, "CatalogSource", op, obj, old)
	}

	if r := h.Handle(ctx, req(admissionv1.Create, evil, nil)); r.Allowed || r.Result.Code != http.StatusForbidden ||
		!strings.Contains(r.Result.Message, "CatalogSource tenant/evil is not trusted to serve operators") {
		t.Errorf("untrusted create (enforce) = %+v", r.Result)
	}
	if r := h.Handle(ctx, req(admissionv1.Create, good, nil)); !r.Allowed || len(r.Warnings) != 0 {
		t.Errorf("trusted image create = %+v", r)
	}
	if r := h.Handle(ctx, req(admissionv1.Update, repointed, good)); r.Allowed || !strings.Contains(r.Result.Message, "spec.address evil:50051") {
		t.Errorf("update adding an address = %+v", r.Result)
	}
	if r := h.Handle(ctx, req(admissionv1.Update, relabelled, evil)); !r.Allowed {
		t.Errorf("metadata update of an existing untrusted catalog is not checked: %+v", r.Result)
	}
	if r := h.Handle(ctx, req(admissionv1.Delete, nil, evil)); !r.Allowed {
		t.Errorf("delete = %+v", r.Result)
	}
	named := catalogSource("", "", map[string]any{"sourceType": "configmap", "configMap": "x"})
	named["metadata"] = map[string]any{"generateName": "cat-"}
	if r := h.Handle(ctx, req(admissionv1.Create, named, nil)); r.Allowed || !strings.Contains(r.Result.Message, "CatalogSource ns/cat-<generated>") {
		t.Errorf("generated name, namespace from the request = %+v", r.Result)
	}
	if r := h.Handle(ctx, req(admissionv1.Create, []byte(`{"metadata":null}`), nil)); r.Allowed || r.Result.Code != http.StatusBadRequest {
		t.Errorf("no metadata = %+v", r.Result)
	}
	if r := h.Handle(ctx, req(admissionv1.Update, good, []byte(`{`))); r.Allowed || r.Result.Code != http.StatusBadRequest {
		t.Errorf("malformed old object = %+v", r.Result)
	}
	if r := h.Handle(ctx, request(t, "Subscription", admissionv1.Create, evil, nil)); !r.Allowed {
		t.Errorf("another kind = %+v", r.Result)
	}

	ch.Policies = catalogTrustMode(Warn)
	counter := metrics.PolicyViolations.WithLabelValues(UntrustedCatalogPolicy, string(Warn))
	before := testutil.ToFloat64(counter)
	if r := h.Handle(ctx, req(admissionv1.Create, evil, nil)); !r.Allowed || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "olmguard: CatalogSource tenant/evil is not trusted") {
		t.Errorf("untrusted create (warn) = %+v", r)
	}
	if got := testutil.ToFloat64(counter) - before; got != 1 {
		t.Errorf("%s violations counted %v, want 1", UntrustedCatalogPolicy, got)
	}
	ch.Policies = catalogTrustMode(Off)
	if r := h.Handle(ctx, req(admissionv1.Create, []byte(`garbage`), nil)); !r.Allowed {
		t.Errorf("off reads nothing: %+v", r.Result)
	}
}

// catalogGets counts the CatalogSource GETs a handler makes, and can fail them.
type catalogGets struct {
	client.Reader
	n    *int
	fail bool
}

func (c catalogGets) Get(ctx context.Context, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if _, ok := o.(*v1alpha1.CatalogSource); ok {
		*c.n++
		if c.fail {
			return context.DeadlineExceeded
		}
	}
	return c.Reader.Get(ctx, k, o, opts...)
}

func TestSubscriptionHandlerCatalogTrust(t *testing.T) {
	ctx := context.Background()
	evil := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "evil"},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: "evil:50051"}}
	good := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "good"},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: "registry.example.com/catalogs/ops:v1"}}
	gets := 0
	reader := catalogGets{Reader: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(evil, good).Build(), n: &gets}
	sh := &SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader}, CatalogSources: admit.LiveCatalogSources{Reader: reader},
		Trusted: trusted, Policies: catalogTrustMode(Enforce)}
	h := served(sh)
	req := func(op admissionv1.Operation, obj, old any) admission.Request {
		r := request(t, "Subscription", op, obj, old)
		r.Namespace = "tenant"
		return r
	}
	for _, tc := range []struct {
		name     string
		req      admission.Request
		denied   string
		wantGets int
	}{
		{"to a tenant's catalog at an address", req(admissionv1.Create, subTo("tenant", "evil"), nil), "installs from CatalogSource tenant/evil, which is not trusted", 1},
		{"to a tenant's catalog from a trusted registry", req(admissionv1.Create, subTo("tenant", "good"), nil), "", 1},
		{"to a catalog not there", req(admissionv1.Create, subTo("tenant", "later"), nil), "it does not exist", 1},
		{"to the global catalog: no lookup", req(admissionv1.Create, subTo("olm", "operatorhubio"), nil), "", 0},
		{"repointed to the tenant's catalog", req(admissionv1.Update, subTo("tenant", "evil"), subTo("olm", "operatorhubio")), "CatalogSource tenant/evil", 1},
		{"an update not changing its catalog is not checked", req(admissionv1.Update, subTo("tenant", "evil"), subTo("tenant", "evil")), "", 0},
		{"no source named", req(admissionv1.Create, subTo("tenant", ""), nil), "it does not exist", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gets = 0
			r := h.Handle(ctx, tc.req)
			switch {
			case tc.denied == "" && !r.Allowed:
				t.Errorf("denied: %+v", r.Result)
			case tc.denied != "" && (r.Allowed || r.Result.Code != http.StatusForbidden || !strings.Contains(r.Result.Message, tc.denied)):
				t.Errorf("answer %+v, want denied saying %q", r.Result, tc.denied)
			}
			if gets != tc.wantGets {
				t.Errorf("%d CatalogSource GETs, want %d", gets, tc.wantGets)
			}
		})
	}

	// Off, or without the lookup, nothing is read.
	gets = 0
	for _, off := range []*SubscriptionHandler{
		{Subscriptions: sh.Subscriptions, CatalogSources: sh.CatalogSources, Trusted: trusted, Policies: catalogTrustMode(Off)},
		{Subscriptions: sh.Subscriptions, Trusted: trusted, Policies: catalogTrustMode(Enforce)},
	} {
		if r := served(off).Handle(ctx, req(admissionv1.Create, subTo("tenant", "evil"), nil)); !r.Allowed || gets != 0 {
			t.Errorf("catalog trust off: %+v after %d GETs", r.Result, gets)
		}
	}

	// A failed lookup admits with a warning, counted; the other policies still stand.
	failing := *sh
	failing.CatalogSources = admit.LiveCatalogSources{Reader: catalogGets{Reader: reader, n: &gets, fail: true}}
	failing.Policies.DuplicatePackage = Enforce
	counter := metrics.LookupErrors.WithLabelValues(SubscriptionsWebhook)
	before := testutil.ToFloat64(counter)
	if r := served(&failing).Handle(ctx, req(admissionv1.Create, subTo("tenant", "evil"), nil)); !r.Allowed || len(r.Warnings) != 1 ||
		!strings.Contains(r.Warnings[0], "could not list CatalogSources, catalog trust not checked") {
		t.Errorf("lookup failing: %+v", r)
	}
	if got := testutil.ToFloat64(counter) - before; got != 1 {
		t.Errorf("lookup errors increased by %v, want 1", got)
	}
}

// FuzzCatalogSourceHandler: any body gets a well-formed answer and never a panic; only an
// untrusted CatalogSource's create or update is denied.
func FuzzCatalogSourceHandler(f *testing.F) {
	f.Add(byte(0), []byte(`{"metadata":{"name":"c","namespace":"tenant"},"spec":{"sourceType":"grpc","address":"x:1"}}`), []byte(nil))
	f.Add(byte(1), []byte(`{"metadata":{"name":"c"},"spec":{"sourceType":"grpc","image":"registry.example.com/catalogs/x:v1"}}`),
		[]byte(`{"metadata":{"name":"c"},"spec":{"sourceType":"configmap","configMap":"c"}}`))
	f.Add(byte(2), []byte(`{"metadata":null}`), []byte(`0`))
	f.Add(byte(3), []byte(`{"metadata":{"name":"s","namespace":"tenant"},"spec":{"source":"c","sourceNamespace":"tenant","name":"p"}}`), []byte(nil))
	f.Fuzz(func(t *testing.T, which byte, obj, old []byte) {
		c := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "c"}, Spec: v1alpha1.CatalogSourceSpec{SourceType: "grpc", Address: "x:1"}}
		reader := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(c).Build()
		h := served(&CatalogSourceHandler{Trusted: trusted, Policies: catalogTrustMode(Enforce)})
		kind := "CatalogSource"
		if which&1 == 1 {
			h = served(&SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader}, CatalogSources: admit.LiveCatalogSources{Reader: reader},
				Trusted: trusted, Policies: catalogTrustMode(Enforce)})
			kind = "Subscription"
		}
		op := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete}[int(which/2)%3]
		r := h.Handle(context.Background(), request(t, kind, op, obj, old))
		// Only an untrusted catalog may be denied.
		checkValidatingResponse(t, r, string(op)+" "+kind, func(msg string) bool {
			return op != admissionv1.Delete && strings.Contains(msg, "not trusted to serve operators")
		})
	})
}
