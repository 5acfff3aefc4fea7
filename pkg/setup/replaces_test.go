package setup_test

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/validate"
	"github.com/olmguard/olmguard/test/testenv"
)

// Namespaces whose CSVs the in-process webhook judges with the replaces-cycle guard in enforce,
// and, in the second, in warn on a create and enforce on an update: the CSVs there were admitted
// (warned) before an administrator switched the policy to enforce.
const (
	replacesEnforceNamespace = "replaces-enforce"
	replacesLaterNamespace   = "replaces-enforce-later"
)

// withReplacesModes serves the namespaces above from the production handler factory built with
// the guard in enforce, every other namespace from production itself.
func withReplacesModes(path string, production admit.HandlerFactory) admit.HandlerFactory {
	return func(mgr manager.Manager) (admit.Decider, error) {
		w := setup.DefaultWebhook()
		w.Policies.ReplacesCycle = validate.Enforce
		var enforce admit.HandlerFactory
		for _, e := range w.Admission() {
			if e.Path == path {
				enforce = e.Handler
			}
		}
		e, err := enforce(mgr)
		if err != nil {
			return nil, err
		}
		prod, err := production(mgr)
		if err != nil {
			return nil, err
		}
		return byNamespace{replacesEnforceNamespace: e, replacesLaterNamespace: byOperation{admissionv1.Create: prod, admissionv1.Update: e}, "": prod}, nil
	}
}

// byOperation serves each operation from its own decider.
type byOperation map[admissionv1.Operation]admit.Decider

func (b byOperation) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	routes := map[admissionv1.Operation]admission.Handler{}
	for op, d := range b {
		h, err := d.For(rules)
		if err != nil {
			return nil, err
		}
		routes[op] = h
	}
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		return routes[req.Operation].Handle(ctx, req)
	}), nil
}

func replacingCSV(ns, name, replaces string, labels map[string]string) *v1alpha1.ClusterServiceVersion {
	return &v1alpha1.ClusterServiceVersion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, Replaces: replaces,
			InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}},
	}
}

// The replaces-cycle guard (OCPBUGS-23954) through a real kube-apiserver and olmguard's webhook
// server: a self-replacing CSV is warned about by default and refused in enforce, a CSV closing a
// cycle of two is refused in enforce, a normal upgrade chain is admitted without a word, and an
// update that leaves spec.replaces alone is admitted even for a CSV already in a cycle and with
// the policy in enforce (OLM must keep managing its finalizer and status). Fails before the fix:
// the self-replacing CSV was admitted without a warning in every mode.
func TestReplacesCycleGuard(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	warnNS := testenv.Namespace(t, env.Client, "replaces-warn")
	enforceNS := testenv.Namespace(t, env.Client, replacesEnforceNamespace)
	laterNS := testenv.Namespace(t, env.Client, replacesLaterNamespace)
	c, w := testenv.WarningClient(t, env.Config, env.Scheme)
	w.Take()
	// warned writes obj and checks the warnings: want in them, or none from olmguard when empty.
	warned := func(t *testing.T, write func(context.Context, client.Object, ...client.CreateOption) error, obj client.Object, want string) {
		t.Helper()
		if err := write(ctx, obj); err != nil {
			t.Fatalf("%s: %v", obj.GetName(), err)
		}
		got := w.Take()
		if want == "" && strings.Contains(got, "olmguard") || !strings.Contains(got, want) {
			t.Fatalf("%s: warnings %q, want %q", obj.GetName(), got, want)
		}
	}
	create := c.Create
	update := func(ctx context.Context, obj client.Object, _ ...client.CreateOption) error {
		return c.Update(ctx, obj)
	}
	denied := func(t *testing.T, err error, want string) {
		t.Helper()
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v, want the guard's denial saying %q", err, want)
		}
	}

	t.Run("self-replacing, warn (default)", func(t *testing.T) {
		csv := replacingCSV(warnNS, "self.v1", "self.v1", nil)
		warned(t, create, csv, "CSV self.v1 in namespace "+warnNS+" replaces itself")
	})
	t.Run("self-replacing, enforce", func(t *testing.T) {
		denied(t, env.Client.Create(ctx, replacingCSV(enforceNS, "self.v1", "self.v1", nil)), "replaces itself")
	})
	t.Run("closing a cycle of two, enforce", func(t *testing.T) {
		if err := env.Client.Create(ctx, replacingCSV(enforceNS, "b.v1", "a.v1", nil)); err != nil {
			t.Fatal(err)
		}
		denied(t, env.Client.Create(ctx, replacingCSV(enforceNS, "a.v1", "b.v1", nil)), "a.v1 replaces b.v1, b.v1 replaces a.v1")
	})
	t.Run("normal upgrade chain, enforce", func(t *testing.T) {
		for _, csv := range []*v1alpha1.ClusterServiceVersion{replacingCSV(enforceNS, "op.v1", "", nil),
			replacingCSV(enforceNS, "op.v2", "op.v1", nil), replacingCSV(enforceNS, "op.v3", "op.v2", nil)} {
			warned(t, create, csv, "")
		}
	})
	t.Run("a copy replacing itself, then made a CSV of its own, enforce", func(t *testing.T) {
		csv := replacingCSV(enforceNS, "copy.v1", "copy.v1", map[string]string{olm.CopiedFromLabel: "elsewhere"})
		warned(t, create, csv, "")
		csv.Labels = nil
		denied(t, env.Client.Update(ctx, csv), "replaces itself")
	})
	t.Run("update leaving replaces alone, CSV in a cycle, enforce", func(t *testing.T) {
		csv := replacingCSV(laterNS, "self.v1", "self.v1", nil)
		warned(t, create, csv, "replaces itself") // created while the policy warned
		csv.Annotations = map[string]string{"example.com/touched": "yes"}
		csv.Finalizers = append(csv.Finalizers, "example.com/hold")
		warned(t, update, csv, "")
		csv.Finalizers = nil
		warned(t, update, csv, "")
		csv.Spec.Replaces = "self.v0" // fixing it is admitted too
		warned(t, update, csv, "")
	})
}
