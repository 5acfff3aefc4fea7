package setup_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/validate"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/testenv"
)

// Namespaces whose CatalogSources and Subscriptions the in-process webhook judges with catalog
// trust on (it is off by default): enforced in ctEnforceNamespace and ctPlatformNamespace,
// warned in ctWarnNamespace, with ctTrusted as the allowlist.
const (
	ctEnforceNamespace  = "ct-enforce"
	ctWarnNamespace     = "ct-warn"
	ctPlatformNamespace = "ct-platform"
	ctTrustedRegistry   = "registry.example.com/catalogs"
)

var ctTrusted = validate.TrustedCatalogs{GlobalNamespace: "olm", Namespaces: []string{ctPlatformNamespace}, Registries: []string{ctTrustedRegistry}}

// withCatalogTrustModes serves the requests of the namespaces above from the production handler
// factory of path built with catalog trust on, and every other namespace's from next.
func withCatalogTrustModes(path string, next admit.HandlerFactory) admit.HandlerFactory {
	factory := func(m validate.Mode) admit.HandlerFactory {
		w := setup.DefaultWebhook()
		w.Policies.CatalogTrust, w.TrustedCatalogs = m, ctTrusted
		for _, e := range w.Admission() {
			if e.Path == path {
				return e.Handler
			}
		}
		panic("no admission path " + path)
	}
	return func(mgr manager.Manager) (admit.Decider, error) {
		routes := byNamespace{}
		for ns, f := range map[string]admit.HandlerFactory{ctEnforceNamespace: factory(validate.Enforce), ctPlatformNamespace: factory(validate.Enforce),
			ctWarnNamespace: factory(validate.Warn), "": next} {
			d, err := f(mgr)
			if err != nil {
				return nil, err
			}
			routes[ns] = d
		}
		return routes, nil
	}
}

// byNamespace answers the requests of each namespace with its decision, and those of every other
// namespace with the decision of "", each bound to the endpoint's rules.
type byNamespace map[string]admit.Decider

func (b byNamespace) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	routes := map[string]admission.Handler{}
	for ns, d := range b {
		h, err := d.For(rules)
		if err != nil {
			return nil, err
		}
		routes[ns] = h
	}
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		if h, ok := routes[req.Namespace]; ok {
			return h.Handle(ctx, req)
		}
		return routes[""].Handle(ctx, req)
	}), nil
}

func newCatalogSource(ns, name, image, address string) *v1alpha1.CatalogSource {
	return &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: image, Address: address}}
}

func subscriptionTo(ns, name, sourceNS, source string) *v1alpha1.Subscription {
	s := builders.Subscription(ns, name, name, v1alpha1.ApprovalAutomatic)
	s.Spec.CatalogSourceNamespace, s.Spec.CatalogSource = sourceNS, source
	return s
}

// Catalog trust through a real kube-apiserver (OLM #3820). Off, the default, a tenant's
// CatalogSource at an address it runs, and a Subscription to it, are admitted without a word: OLM
// would install whatever it serves. Enforced, that CatalogSource, one from an untrusted image,
// and an update pointing a trusted one at an address are denied, naming the catalog and the
// settings; catalogs in a trusted namespace or from a trusted registry are admitted; a
// Subscription created or repointed to an untrusted catalog (one written while the policy was
// off) or to a missing one outside the trusted namespaces is denied; one to the global or a
// trusted namespace is admitted. Warned, both are admitted with the warning. Each is counted.
func TestCatalogTrust(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	c, w := testenv.WarningClient(t, env.Config, env.Scheme)
	off, enforce, warn, platform := testenv.Namespace(t, env.Client, "ct-off"), testenv.Namespace(t, env.Client, ctEnforceNamespace), testenv.Namespace(t, env.Client, ctWarnNamespace), testenv.Namespace(t, env.Client, ctPlatformNamespace)
	const notTrusted = "not trusted to serve operators"
	violations := func(policy string, m validate.Mode) func() float64 {
		counter := metrics.PolicyViolations.WithLabelValues(policy, string(m))
		before := testutil.ToFloat64(counter)
		return func() float64 { return testutil.ToFloat64(counter) - before }
	}
	denied := func(what string, err error, want ...string) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want it denied", what, err)
			return
		}
		for _, s := range append(want, notTrusted, "OLM #3820", "--trusted-catalog-namespaces", "--trusted-catalog-registries", "--policy-catalog-trust") {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: denied with %q, want it to say %q", what, err, s)
			}
		}
	}
	admitted := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Errorf("%s: %v, want it admitted", what, err)
		}
		if got := w.Take(); strings.Contains(got, notTrusted) {
			t.Errorf("%s: warnings %q, want none on catalog trust", what, got)
		}
	}

	t.Run("off by default", func(t *testing.T) {
		w.Take()
		admitted("a tenant's CatalogSource at its own address", c.Create(ctx, newCatalogSource(off, "tenant", "", "evil.example:50051")))
		admitted("a Subscription to it", c.Create(ctx, subscriptionTo(off, "escalate", off, "tenant")))
	})

	t.Run("enforce", func(t *testing.T) {
		catalogs, subs := violations(validate.UntrustedCatalogPolicy, validate.Enforce), violations(validate.UntrustedCatalogSubscriptionPolicy, validate.Enforce)
		denied("a CatalogSource at an address", c.Create(ctx, newCatalogSource(enforce, "at-address", "", "evil.example:50051")),
			"CatalogSource ct-enforce/at-address", "namespace ct-enforce is not a trusted catalog namespace (trusted: olm, ct-platform)", "spec.address evil.example:50051")
		denied("a CatalogSource from an untrusted image", c.Create(ctx, newCatalogSource(enforce, "quay", "quay.io/evil/catalog:v1", "")),
			"CatalogSource ct-enforce/quay", "image quay.io/evil/catalog:v1 is not under a trusted registry ("+ctTrustedRegistry+")")
		denied("a CatalogSource from a look-alike registry", c.Create(ctx, newCatalogSource(enforce, "lookalike", "registry.example.com/catalogs-evil/x:v1", "")),
			"CatalogSource ct-enforce/lookalike")
		good := newCatalogSource(enforce, "good", ctTrustedRegistry+"/ops:v1", "")
		admitted("a CatalogSource from a trusted registry", c.Create(ctx, good))
		admitted("a CatalogSource at an address in a trusted namespace", c.Create(ctx, newCatalogSource(platform, "internal", "", "catalog.platform.svc:50051")))
		if got := catalogs(); got != 3 {
			t.Errorf("%s violations counted %v, want 3", validate.UntrustedCatalogPolicy, got)
		}

		good.Labels = map[string]string{"team": "ops"}
		admitted("a metadata update of a trusted catalog", c.Update(ctx, good))
		good.Spec.Address = "evil.example:50051"
		denied("pointing a trusted catalog at an address", c.Update(ctx, good), "CatalogSource ct-enforce/good", "spec.address evil.example:50051")

		admitted("a Subscription to the global catalog namespace", c.Create(ctx, subscriptionTo(enforce, "global", "olm", "operatorhubio")))
		admitted("a Subscription to a catalog from a trusted registry", c.Create(ctx, subscriptionTo(enforce, "good", enforce, "good")))
		admitted("a Subscription to a trusted namespace's catalog", c.Create(ctx, subscriptionTo(enforce, "platform", platform, "internal")))
		denied("a Subscription to a catalog written while the policy was off", c.Create(ctx, subscriptionTo(enforce, "escalate", off, "tenant")),
			"Subscription ct-enforce/escalate installs from CatalogSource ct-off/tenant", "spec.address evil.example:50051")
		denied("a Subscription to a catalog not there", c.Create(ctx, subscriptionTo(enforce, "early", enforce, "at-address")),
			"CatalogSource ct-enforce/at-address", "it does not exist")
		global := &v1alpha1.Subscription{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: enforce, Name: "global"}, global); err != nil {
			t.Fatal(err)
		}
		global.Spec.CatalogSourceNamespace, global.Spec.CatalogSource = off, "tenant"
		denied("repointing a Subscription to an untrusted catalog", c.Update(ctx, global), "Subscription ct-enforce/global installs from CatalogSource ct-off/tenant")
		if got := subs(); got != 3 {
			t.Errorf("%s violations counted %v, want 3", validate.UntrustedCatalogSubscriptionPolicy, got)
		}
	})

	t.Run("warn", func(t *testing.T) {
		counted := violations(validate.UntrustedCatalogPolicy, validate.Warn)
		w.Take()
		if err := c.Create(ctx, newCatalogSource(warn, "tenant", "", "evil.example:50051")); err != nil {
			t.Fatalf("warn mode denied: %v", err)
		}
		if got := w.Take(); !strings.Contains(got, "olmguard: CatalogSource ct-warn/tenant is "+notTrusted) {
			t.Errorf("untrusted CatalogSource in warn mode: warnings %q, want it named", got)
		}
		if err := c.Create(ctx, subscriptionTo(warn, "escalate", warn, "tenant")); err != nil {
			t.Fatalf("warn mode denied: %v", err)
		}
		if got := w.Take(); !strings.Contains(got, "Subscription ct-warn/escalate installs from CatalogSource ct-warn/tenant, which is "+notTrusted) {
			t.Errorf("Subscription to it in warn mode: warnings %q, want it named", got)
		}
		if got := counted(); got != 1 {
			t.Errorf("%s warnings counted %v, want 1", validate.UntrustedCatalogPolicy, got)
		}
	})
}
