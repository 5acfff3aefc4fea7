package charts_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/olmguard/olmguard/charts"
	olmscheme "github.com/olmguard/olmguard/pkg/olm/scheme"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/uninstall"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
	"github.com/olmguard/olmguard/test/certmanager"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestAgainstAPIServer runs the chart against a real kube-apiserver (envtest) that serves OLM's
// CRDs, cert-manager's (from its Go module) and the Prometheus Operator's ServiceMonitor and
// PrometheusRule:
//   - every render (the defaults, each example, another namespace) passes a server-side dry run:
//     each object server-side applied with dryRun=All and strict field validation;
//   - Helm's own server dry run of an install (action.Install, DryRunServer) through ActionConfig;
//   - a real helm install, then the README's uninstall (kubectl olmguard uninstall, then helm
//     uninstall) leaves none of the release's objects;
//   - kubectl-olmguard uninstall, as the pre-delete hook's ServiceAccount (impersonated) with the
//     hook's RBAC, succeeds, and fails with any one verb less.
func TestAgainstAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	certmanager.InstallCRDs(t, c)
	installMonitoringCRDs(t, env)
	kubeconfig := testenv.WriteKubeconfig(t, env.Config)
	ctx := context.Background()

	t.Run("server-side dry run", func(t *testing.T) {
		cases := withDefaults(t)
		cases = append(cases, example{"defaults in another namespace", nil})
		for i, ex := range cases {
			ns := charts.DefaultNamespace
			if i == len(cases)-1 {
				ns = "guard"
			}
			t.Run(ex.name, func(t *testing.T) {
				createNamespace(t, c, ns)
				objs := objects(t, charts.Options{Namespace: ns, Values: ex.values})
				kinds := map[string]int{}
				for _, o := range objs {
					u := o.DeepCopy()
					//nolint:staticcheck // server-side apply as kubectl does it; Client.Apply takes no field validation
					err := c.Patch(ctx, u, client.Apply, client.DryRunAll, client.FieldOwner("olmguard-chart-test"),
						client.ForceOwnership, client.FieldValidation(metav1.FieldValidationStrict))
					if err != nil {
						t.Errorf("%s %s/%s rejected: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
					}
					kinds[o.GetKind()]++
				}
				t.Logf("%d objects accepted: %v", len(objs), kinds)
			})
		}
	})

	t.Run("helm install --dry-run=server", func(t *testing.T) {
		for _, ex := range withDefaults(t) {
			t.Run(ex.name, func(t *testing.T) {
				// The chart's own namespace (namespace.create) cannot be one that exists already.
				ns := charts.DefaultNamespace
				if create, _, _ := unstructured.NestedBool(ex.values, "namespace", "create"); create {
					ns = "olmguard-own"
				}
				cfg, err := charts.ActionConfig(kubeconfig, ns, nil)
				if err != nil {
					t.Fatal(err)
				}
				in := action.NewInstall(cfg)
				in.ReleaseName, in.Namespace, in.DryRunStrategy = charts.DefaultReleaseName, ns, action.DryRunServer
				r, err := in.RunWithContext(ctx, load(t), ex.values)
				if err != nil {
					t.Fatal(err)
				}
				if rel := r.(*release.Release); rel.Manifest == "" {
					t.Error("empty manifest")
				}
			})
		}
	})

	t.Run("helm upgrade from the previous chart with --reset-then-reuse-values", func(t *testing.T) {
		testUpgradeFromPrevious(t, env, kubeconfig)
	})

	t.Run("the uninstall hook's RBAC is what kubectl-olmguard uninstall needs", func(t *testing.T) {
		testUninstallHookRBAC(t, env)
	})

	t.Run("the helm test Pod's RBAC is what kubectl-olmguard probe needs", func(t *testing.T) {
		testProbeTestRBAC(t, env)
	})

	t.Run("helm install, kubectl olmguard uninstall, helm uninstall", func(t *testing.T) {
		const ns = "olmguard-helm"
		cfg, err := charts.ActionConfig(kubeconfig, ns, nil)
		if err != nil {
			t.Fatal(err)
		}
		in := action.NewInstall(cfg)
		in.ReleaseName, in.Namespace, in.CreateNamespace = charts.DefaultReleaseName, ns, true
		in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, time.Minute // no kubelet: nothing becomes Ready
		if _, err := in.RunWithContext(ctx, load(t), nil); err != nil {
			t.Fatal(err)
		}
		installed := objects(t, charts.Options{Namespace: ns})
		for _, o := range installed {
			if err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy()); err != nil {
				t.Errorf("%s %s/%s not installed: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
		if err := uninstall.Run(ctx, c, io.Discard, uninstall.DefaultStopTimeout); err != nil {
			t.Fatalf("kubectl olmguard uninstall: %v", err)
		}
		un := action.NewUninstall(cfg)
		// The README's uninstall without the pre-delete hook (uninstallHook.enabled=false, or
		// --no-hooks): envtest runs no Job. The hook's permissions are checked below.
		un.DisableHooks = true
		un.WaitStrategy, un.Timeout = kube.HookOnlyStrategy, time.Minute
		if _, err := un.Run(charts.DefaultReleaseName); err != nil {
			t.Fatalf("helm uninstall after kubectl olmguard uninstall: %v", err)
		}
		// No garbage collector in envtest: only what Helm deletes itself is checked.
		for _, o := range installed {
			err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy())
			if !apierrors.IsNotFound(err) {
				t.Errorf("%s %s/%s left after uninstall (%v)", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
		secrets := &corev1.SecretList{}
		if err := c.List(ctx, secrets, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil || len(secrets.Items) != 0 {
			t.Errorf("helm's release records left: %d (%v)", len(secrets.Items), err)
		}
	})
}

// testUninstallHookRBAC applies the pre-delete hook's ServiceAccount and RBAC (not its Job: envtest
// runs no pod) and runs what the hook's command runs (kubectl-olmguard uninstall --yes
// --olmguard-namespace ns: pkg/uninstall's Survey, then RunWith) as that ServiceAccount, with a
// Deployment to scale, both webhook configurations and a CSV holding the finalizer: it succeeds,
// and with any one verb of the ClusterRole or Role less it fails on that verb.
func testUninstallHookRBAC(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	c := env.Client
	const ns, tenant = "olmguard-hook", "hook-tenant"
	createNamespace(t, c, ns)
	createNamespace(t, c, tenant)
	objs := hookObjects(t, charts.Options{Namespace: ns})["uninstall-hook.yaml"]
	var roles []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Job":
			continue
		case "ClusterRole", "Role":
			roles = append(roles, o)
		}
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	t.Cleanup(func() {
		for _, o := range objs {
			_ = c.Delete(ctx, o.DeepCopy())
		}
	})
	labels := map[string]string{olmguard.NameLabel: olmguard.Name}
	reset := func() error {
		dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-controller", Labels: labels}}
		if _, err := controllerutil.CreateOrUpdate(ctx, c, dep, func() error {
			dep.Spec.Replicas = ptr.To[int32](1)
			dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
			dep.Spec.Template.Labels = labels
			dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "controller", Image: "example.com/olmguard"}}
			return nil
		}); err != nil {
			return err
		}
		for _, w := range []client.Object{
			&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-mutating", Labels: labels}},
			&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-validating", Labels: labels}},
		} {
			if err := c.Create(ctx, w); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
		csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "held.v1.0.0"}}
		_, err := controllerutil.CreateOrUpdate(ctx, c, csv, func() error {
			csv.Finalizers = []string{olmguard.CleanupFinalizer}
			csv.Spec.DisplayName, csv.Spec.Version = "held", "1.0.0"
			csv.Spec.InstallStrategy = v1alpha1.NamedInstallStrategy{StrategyName: "deployment", StrategySpec: runtime.RawExtension{Raw: []byte(`{"deployments":[]}`)}}
			return nil
		})
		return err
	}
	t.Cleanup(func() {
		_ = reset() // leaves the CSV deletable: the finalizer is removed below
		csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "held.v1.0.0"}}
		_ = c.Patch(ctx, csv, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		_ = c.Delete(ctx, csv)
		_ = c.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-mutating"}})
		_ = c.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-validating"}})
	})
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":olmguard-uninstall",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	s, err := olmscheme.New()
	if err != nil {
		t.Fatal(err)
	}
	as, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	run := func() error {
		o := uninstall.Options{OlmguardNamespace: ns, StopTimeout: 10 * time.Second}
		if _, err := uninstall.Survey(ctx, as, o); err != nil {
			return err
		}
		return uninstall.RunWith(ctx, as, io.Discard, o)
	}
	setRules := func(rules map[string][]rbacv1.PolicyRule) {
		t.Helper()
		for _, r := range roles {
			u := r.DeepCopy()
			if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
				t.Fatal(err)
			}
			raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
				Rules []rbacv1.PolicyRule `json:"rules"`
			}{rules[r.GetKind()]})
			if err != nil {
				t.Fatal(err)
			}
			u.Object["rules"] = raw["rules"]
			if err := c.Update(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	full := map[string][]rbacv1.PolicyRule{"ClusterRole": uninstallClusterRules, "Role": uninstallNamespaceRules}

	t.Run("all of them", func(t *testing.T) {
		setRules(full)
		testenv.EventuallyExplained(t, "uninstall succeeds as the hook's ServiceAccount", func(context.Context) (bool, string, error) {
			if err := reset(); err != nil {
				return false, "", err
			}
			err := run()
			return err == nil, fmt.Sprint(err), nil
		})
		csv := &v1alpha1.ClusterServiceVersion{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "held.v1.0.0"}, csv); err != nil || len(csv.Finalizers) != 0 {
			t.Errorf("the CSV keeps finalizers %v (%v)", csv.Finalizers, err)
		}
		dep := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "olmguard-controller"}, dep); err != nil || *dep.Spec.Replicas != 0 {
			t.Errorf("the Deployment is not scaled to zero (%v)", err)
		}
		if err := c.Get(ctx, client.ObjectKey{Name: "olmguard-mutating"}, &admissionregistrationv1.MutatingWebhookConfiguration{}); !apierrors.IsNotFound(err) {
			t.Errorf("olmguard-mutating not deleted (%v)", err)
		}
	})
	for kind, rules := range full {
		for i, rule := range rules {
			for j, verb := range rule.Verbs {
				t.Run(fmt.Sprintf("%s without %s %v", kind, verb, rule.Resources), func(t *testing.T) {
					less := map[string][]rbacv1.PolicyRule{}
					for k, v := range full {
						less[k] = v
					}
					cut := slices.Clone(rules)
					cut[i].Verbs = slices.Delete(slices.Clone(rule.Verbs), j, j+1)
					if len(cut[i].Verbs) == 0 {
						cut = slices.Delete(cut, i, i+1)
					}
					less[kind] = cut
					setRules(less)
					testenv.EventuallyExplained(t, "uninstall fails on "+verb, func(context.Context) (bool, string, error) {
						if err := reset(); err != nil {
							return false, "", err
						}
						err := run()
						if err == nil || !strings.Contains(err.Error(), "cannot "+verb+" resource") {
							return false, fmt.Sprint(err), nil
						}
						for _, r := range rule.Resources {
							if strings.Contains(err.Error(), `resource "`+r+`"`) {
								return true, "", nil
							}
						}
						return false, err.Error(), nil
					})
				})
			}
		}
	}
}

// testProbeTestRBAC applies the helm test hook's ServiceAccount, Role and RoleBinding and makes
// kubectl-olmguard probe's call (a dry-run create of the probe ConfigMap) as that ServiceAccount:
// the kube-apiserver allows it (envtest runs no webhook, so the answer is unmarked: NotCalled, not
// a refusal), and refuses it once the Role is gone.
func testProbeTestRBAC(t *testing.T, env *testenv.Env) {
	ctx := context.Background()
	c := env.Client
	const ns = "olmguard-probe-test"
	createNamespace(t, c, ns)
	objs := hookObjects(t, charts.Options{Namespace: ns})["tests/webhook-probe.yaml"]
	var role *unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Pod":
			continue
		case "Role":
			role = o
		}
		if err := c.Create(ctx, o.DeepCopy()); err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + ns + ":olmguard-test",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
	}
	as, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	probe := func() (webhookprobe.Result, error) {
		nonce := webhookprobe.Nonce()
		obj := webhookprobe.Object(ns, nonce)
		err := as.Create(ctx, obj, client.DryRunAll)
		return webhookprobe.Judge(nonce, obj.GetAnnotations(), err), err
	}
	testenv.EventuallyExplained(t, "the probe's dry run is allowed", func(context.Context) (bool, string, error) {
		res, err := probe()
		return err == nil && res.Outcome == webhookprobe.NotCalled, fmt.Sprintf("%s %v", res.Outcome, err), nil
	})
	if err := c.Delete(ctx, role.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	testenv.EventuallyExplained(t, "the probe's dry run is refused without the Role", func(context.Context) (bool, string, error) {
		_, err := probe()
		return apierrors.IsForbidden(err), fmt.Sprint(err), nil
	})
}

// previousChart is olmguard's own chart as of commit 82e91b6, before the Helm lifecycle changes
// (testdata/README.md): the version an upgrade starts from.
const previousChart = "testdata/olmguard-0.1.0-82e91b6.tgz"

// testUpgradeFromPrevious installs the previous chart with values of a user's, stands in for the
// self-signed webhook (no pod runs in envtest): its Secret olmguard-webhook-tls and the CA bundle it
// writes into both webhook configurations; then `helm upgrade --reset-then-reuse-values` to this
// chart (action.Upgrade.ResetThenReuseValues). The user's values are kept, this chart's new
// defaults apply (its pre-delete hook is there), the Secret and every caBundle are unchanged.
func testUpgradeFromPrevious(t *testing.T, env *testenv.Env, kubeconfig string) {
	ctx := context.Background()
	c := env.Client
	const ns = "olmguard-upgrade"
	prev, err := loader.Load(previousChart)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := charts.ActionConfig(kubeconfig, ns, nil)
	if err != nil {
		t.Fatal(err)
	}
	user := map[string]any{
		"webhook":      map[string]any{"replicas": 3, "timeoutSeconds": 7, "policies": map[string]any{"approval": "enforce"}},
		"controller":   map[string]any{"replicas": 1},
		"commonLabels": map[string]any{"team": "platform"},
	}
	in := action.NewInstall(cfg)
	in.ReleaseName, in.Namespace, in.CreateNamespace = charts.DefaultReleaseName, ns, true
	in.WaitStrategy, in.Timeout = kube.HookOnlyStrategy, time.Minute
	if _, err := in.RunWithContext(ctx, prev, user); err != nil {
		t.Fatalf("installing the previous chart: %v", err)
	}
	t.Cleanup(func() {
		un := action.NewUninstall(cfg)
		un.DisableHooks, un.WaitStrategy, un.Timeout = true, kube.HookOnlyStrategy, time.Minute
		if _, err := un.Run(charts.DefaultReleaseName); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})

	// What the self-signed webhook writes at its start: its Secret and the CA bundle.
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "olmguard-webhook-tls"},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"ca.crt": []byte("the CA"), "ca.key": []byte("the CA key"), "tls.crt": []byte("the certificate"), "tls.key": []byte("the key")},
	}
	if err := c.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	caBundle := []byte("the CA bundle the webhook injected")
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "olmguard-mutating"}, mutating); err != nil {
		t.Fatal(err)
	}
	injected := map[string]bool{}
	for i := range mutating.Webhooks {
		mutating.Webhooks[i].ClientConfig.CABundle = caBundle
		injected[mutating.Webhooks[i].Name] = true
	}
	if err := c.Update(ctx, mutating, client.FieldOwner("olmguard-webhook")); err != nil {
		t.Fatal(err)
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: "olmguard-validating"}, validating); err != nil {
		t.Fatal(err)
	}
	for i := range validating.Webhooks {
		validating.Webhooks[i].ClientConfig.CABundle = caBundle
		injected[validating.Webhooks[i].Name] = true
	}
	if err := c.Update(ctx, validating, client.FieldOwner("olmguard-webhook")); err != nil {
		t.Fatal(err)
	}

	up := action.NewUpgrade(cfg)
	up.Namespace, up.ResetThenReuseValues = ns, true
	up.WaitStrategy, up.Timeout = kube.HookOnlyStrategy, time.Minute
	r, err := up.RunWithContext(ctx, charts.DefaultReleaseName, load(t), nil)
	if err != nil {
		t.Fatalf("helm upgrade --reset-then-reuse-values: %v", err)
	}
	rel := r.(*release.Release)
	// Compared as JSON: Helm stores the values as JSON (numbers come back as float64).
	if want, got := mustJSON(t, user), mustJSON(t, rel.Config); want != got {
		t.Errorf("the release's user values changed:\nwant %s\n got %s", want, got)
	}
	if rel.Chart.Metadata.Version == "" || !slices.ContainsFunc(rel.Hooks, func(h *release.Hook) bool { return h.Name == "olmguard-uninstall" }) {
		t.Errorf("the upgraded release lacks this chart's pre-delete hook (new defaults not applied)")
	}
	dep := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "olmguard-webhook"}, dep); err != nil || dep.Spec.Replicas == nil || *dep.Spec.Replicas != 3 || dep.Labels["team"] != "platform" {
		t.Errorf("webhook Deployment after the upgrade: replicas %v, labels %v (%v); want 3 and team=platform", dep.Spec.Replicas, dep.Labels, err)
	}
	if dep.Labels["helm.sh/chart"] == "" {
		t.Errorf("the Deployment lacks this chart's standard labels: %v", dep.Labels)
	}
	args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.Contains(args, "--policy-approval=enforce") {
		t.Errorf("webhook args %q lack the user's --policy-approval=enforce", args)
	}
	got := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(secret), got); err != nil {
		t.Fatalf("the serving certificate's Secret after the upgrade: %v", err)
	}
	if diff := cmp.Diff(secret.Data, got.Data); diff != "" {
		t.Errorf("the serving certificate's Secret changed (-before +after):\n%s", diff)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "olmguard-mutating"}, mutating); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "olmguard-validating"}, validating); err != nil {
		t.Fatal(err)
	}
	if len(mutating.Webhooks) == 0 || len(validating.Webhooks) == 0 {
		t.Fatalf("webhooks after the upgrade: %d mutating, %d validating", len(mutating.Webhooks), len(validating.Webhooks))
	}
	for _, w := range mutating.Webhooks {
		if !injected[w.Name] {
			// A webhook the previous chart did not have: the webhook's pods, restarted by the
			// upgrade's new pod template, inject the CA into it at their start.
			t.Logf("%s webhook %s is new in this chart", "mutating", w.Name)
			continue
		}
		if string(w.ClientConfig.CABundle) != string(caBundle) || w.TimeoutSeconds == nil || *w.TimeoutSeconds != 7 {
			t.Errorf("mutating webhook %s after the upgrade: caBundle %q, timeoutSeconds %v", w.Name, w.ClientConfig.CABundle, w.TimeoutSeconds)
		}
	}
	for _, w := range validating.Webhooks {
		if !injected[w.Name] {
			// A webhook the previous chart did not have: the webhook's pods, restarted by the
			// upgrade's new pod template, inject the CA into it at their start.
			t.Logf("%s webhook %s is new in this chart", "validating", w.Name)
			continue
		}
		if string(w.ClientConfig.CABundle) != string(caBundle) || w.TimeoutSeconds == nil || *w.TimeoutSeconds != 7 {
			t.Errorf("validating webhook %s after the upgrade: caBundle %q, timeoutSeconds %v", w.Name, w.ClientConfig.CABundle, w.TimeoutSeconds)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func createNamespace(t *testing.T, c client.Client, name string) {
	t.Helper()
	err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// installMonitoringCRDs serves monitoring.coreos.com/v1 ServiceMonitors and PrometheusRules with
// schemas of our own covering the fields the chart sets (the Prometheus Operator's module is not a
// dependency), so that a misspelt field is still refused.
func installMonitoringCRDs(t *testing.T, env *testenv.Env) {
	t.Helper()
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	strMap := apiextensionsv1.JSONSchemaProps{Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &str}}
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	list := func(item apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &item}}
	}
	selector := obj(map[string]apiextensionsv1.JSONSchemaProps{"name": str, "key": str, "optional": {Type: "boolean"}})
	source := obj(map[string]apiextensionsv1.JSONSchemaProps{"secret": selector, "configMap": selector})
	relabel := list(obj(map[string]apiextensionsv1.JSONSchemaProps{
		"sourceLabels": list(str), "separator": str, "targetLabel": str, "regex": str, "modulus": {Type: "integer"}, "replacement": str, "action": str,
	}))
	endpoint := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"port": str, "interval": str, "scrapeTimeout": str, "scheme": str, "bearerTokenFile": str,
		"authorization": obj(map[string]apiextensionsv1.JSONSchemaProps{"type": str, "credentials": selector}),
		"tlsConfig": obj(map[string]apiextensionsv1.JSONSchemaProps{
			"insecureSkipVerify": {Type: "boolean"}, "serverName": str, "ca": source, "cert": source, "keySecret": selector,
		}),
		"relabelings": relabel, "metricRelabelings": relabel,
	})
	rule := obj(map[string]apiextensionsv1.JSONSchemaProps{
		"alert": str, "record": str, "expr": str, "for": str, "labels": strMap, "annotations": strMap,
	})
	specs := map[string]apiextensionsv1.JSONSchemaProps{
		"ServiceMonitor": obj(map[string]apiextensionsv1.JSONSchemaProps{
			"selector":  obj(map[string]apiextensionsv1.JSONSchemaProps{"matchLabels": strMap}),
			"endpoints": list(endpoint),
		}),
		"PrometheusRule": obj(map[string]apiextensionsv1.JSONSchemaProps{
			"groups": list(obj(map[string]apiextensionsv1.JSONSchemaProps{"name": str, "interval": str, "rules": list(rule)})),
		}),
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for kind, spec := range specs {
		singular := strings.ToLower(kind)
		crds = append(crds, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: singular + "s.monitoring.coreos.com"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "monitoring.coreos.com", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: singular + "s", Singular: singular, Kind: kind, ListKind: kind + "List"},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: ptr.To(obj(map[string]apiextensionsv1.JSONSchemaProps{"spec": spec}))},
				}},
			},
		})
	}
	if _, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{CRDs: crds, MaxTime: testenv.StartTimeout}); err != nil {
		t.Fatal(err)
	}
}
