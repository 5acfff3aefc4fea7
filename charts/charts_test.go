package charts_test

import (
	"encoding/base64"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/webhook"
)

// chartDir is the chart in this checkout (tests run in charts/).
const chartDir = charts.Name

func load(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := charts.Load()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func objects(t *testing.T, o charts.Options) []*unstructured.Unstructured {
	t.Helper()
	objs, err := charts.Objects(load(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	i := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind && o.GetName() == name })
	if i < 0 {
		return nil
	}
	return objs[i]
}

func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	o := find(objs, kind, name)
	if o == nil {
		t.Fatalf("no %s %s", kind, name)
	}
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// example is one documented values file of charts/olmguard/examples.
type example struct {
	name   string
	values map[string]any
}

func examples(t *testing.T) []example {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "examples", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples (%v)", err)
	}
	var out []example
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		vals := map[string]any{}
		if err := yaml.Unmarshal(b, &vals); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, example{filepath.Base(f), vals})
	}
	return out
}

// withDefaults are the default values and every example, as the tests render them.
func withDefaults(t *testing.T) []example {
	return append([]example{{"defaults", nil}}, examples(t)...)
}

// TestLint runs helm lint (the SDK's action.Lint, strict: warnings fail too) on the chart with
// its defaults and with every example's values.
func TestLint(t *testing.T) {
	for _, ex := range withDefaults(t) {
		t.Run(ex.name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict, l.Namespace = true, charts.DefaultNamespace
			res := l.Run([]string{chartDir}, ex.values)
			for _, m := range res.Messages {
				t.Logf("lint: %s", m)
			}
			if len(res.Errors) > 0 || res.TotalChartsLinted != 1 {
				t.Errorf("helm lint: %d charts linted, errors %v", res.TotalChartsLinted, res.Errors)
			}
		})
	}
}

// TestEmbeddedChartIsTheCheckout: the chart built into the binaries (charts.Load) is
// charts/olmguard as checked out.
func TestEmbeddedChartIsTheCheckout(t *testing.T) {
	fromDir, err := charts.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	embedded := load(t)
	if diff := cmp.Diff(fromDir.Raw, embedded.Raw); diff != "" {
		t.Errorf("embedded chart differs (-dir +embedded):\n%s", diff)
	}
}

// TestExamplesAreDocumented: each example file is described in the chart's README, and the
// README names no example that does not exist.
func TestExamplesAreDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ex := range examples(t) {
		names = append(names, ex.name)
		if !strings.Contains(string(readme), "examples/"+ex.name) {
			t.Errorf("README.md does not document examples/%s", ex.name)
		}
	}
	for _, f := range strings.Split(string(readme), "examples/")[1:] {
		name, _, _ := strings.Cut(f, "`")
		if strings.HasSuffix(name, ".yaml") && !slices.Contains(names, name) {
			t.Errorf("README.md names examples/%s, which does not exist", name)
		}
	}
}

// webhookArgs and controllerArgs are the container args of a render.
func args(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	return typed[appsv1.Deployment](t, objs, "Deployment", name).Spec.Template.Spec.Containers[0].Args
}

// parseWebhook parses args with cmd/webhook's own flags and validates them, as the binary does.
func parseWebhook(t *testing.T, args []string) (webhook.Options, setup.Webhook) {
	t.Helper()
	opts, handlers := webhook.DefaultOptions(), setup.DefaultWebhook()
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	opts.BindFlags(fs)
	handlers.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("webhook args %v: %v", args, err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("webhook args %v: %v", args, err)
	}
	return opts, handlers
}

// parseController parses args with cmd/controller's own flags and validates them.
func parseController(t *testing.T, args []string) (controller.Options, setup.Controller) {
	t.Helper()
	opts, reconcilers := controller.DefaultOptions(), setup.DefaultController()
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	opts.BindFlags(fs)
	reconcilers.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("controller args %v: %v", args, err)
	}
	if err := opts.Validate(); err != nil {
		t.Fatalf("controller args %v: %v", args, err)
	}
	if err := reconcilers.Validate(); err != nil {
		t.Fatalf("controller args %v: %v", args, err)
	}
	if _, err := opts.Selected(reconcilers.Reconcilers()); err != nil {
		t.Fatalf("controller args %v: %v", args, err)
	}
	return opts, reconcilers
}

// TestDefaultsAreTheBinariesDefaults: the default values set every policy, threshold and switch
// to the binaries' own default, so installing with Helm or kubectl apply -k changes nothing the
// flags' documentation says; the only differences are the ones the manifests mean.
func TestDefaultsAreTheBinariesDefaults(t *testing.T) {
	objs := objects(t, charts.Options{})
	wopts, handlers := parseWebhook(t, args(t, objs, "olmguard-webhook"))
	wantW := webhook.DefaultOptions()
	wantW.SelfSigned = true
	if diff := cmp.Diff(wantW, wopts); diff != "" {
		t.Errorf("webhook options differ from the flag defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(setup.DefaultWebhook(), handlers); diff != "" {
		t.Errorf("webhook handler settings differ from the flag defaults (-want +got):\n%s", diff)
	}
	copts, reconcilers := parseController(t, args(t, objs, "olmguard-controller"))
	wantC := controller.DefaultOptions()
	wantC.LeaderElect = true
	wantC.HealthProbeBindAddress, wantC.MetricsBindAddress = ":8081", ":8080" // one binary per pod
	if diff := cmp.Diff(wantC, copts); diff != "" {
		t.Errorf("controller options differ from the flag defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(setup.DefaultController(), reconcilers); diff != "" {
		t.Errorf("reconciler settings differ from the flag defaults (-want +got):\n%s", diff)
	}
}

// TestDefaultImage: the kustomize manifests' image is the chart's default.
func TestDefaultImage(t *testing.T) {
	ch := load(t)
	repo := ch.Values["image"].(map[string]any)["repository"]
	if got := repo.(string) + ":" + ch.Metadata.AppVersion; got != manifests.DefaultImage {
		t.Errorf("chart image %s, manifests.DefaultImage %s", got, manifests.DefaultImage)
	}
	if c := typed[appsv1.Deployment](t, objects(t, charts.Options{}), "Deployment", "olmguard-webhook").Spec.Template.Spec.Containers[0]; c.Image != manifests.DefaultImage {
		t.Errorf("rendered image %s", c.Image)
	}
}

// TestWebhookConfigurations: the chart's webhook configurations are registration.Build's for the
// admission table, in the release namespace, with the values' failure policy, timeout, excluded
// namespaces and CA bundle.
func TestWebhookConfigurations(t *testing.T) {
	hooks := admit.Webhooks(setup.DefaultWebhook().Admission())
	ca := base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	for _, tc := range []struct {
		name      string
		namespace string
		values    map[string]any
		change    func(*admissionregistrationv1.WebhookClientConfig, *admissionregistrationv1.FailurePolicyType, *int32, *[]string)
	}{
		{name: "defaults"},
		{name: "another namespace", namespace: "guard"},
		{name: "fail closed, 10 s", values: map[string]any{"webhook": map[string]any{"failurePolicy": "Fail", "timeoutSeconds": 10}},
			change: func(_ *admissionregistrationv1.WebhookClientConfig, fp *admissionregistrationv1.FailurePolicyType, to *int32, _ *[]string) {
				*fp, *to = admissionregistrationv1.Fail, 10
			}},
		{name: "excluded namespaces", values: map[string]any{"webhook": map[string]any{"excludeNamespaces": []any{"a", "kube-system"}}},
			change: func(_ *admissionregistrationv1.WebhookClientConfig, _ *admissionregistrationv1.FailurePolicyType, _ *int32, ns *[]string) {
				*ns = append(*ns, "a")
			}},
		{name: "existing secret", values: map[string]any{"certificate": map[string]any{"mode": "existingSecret", "existingSecret": map[string]any{"name": "s", "caBundle": ca}}},
			change: func(cc *admissionregistrationv1.WebhookClientConfig, _ *admissionregistrationv1.FailurePolicyType, _ *int32, _ *[]string) {
				cc.CABundle, _ = base64.StdEncoding.DecodeString(ca)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := tc.namespace
			if ns == "" {
				ns = charts.DefaultNamespace
			}
			o := registration.DefaultOptions()
			o.Namespace = ns
			wantM, wantV := registration.Build(o, hooks)
			for i := range wantM.Webhooks {
				w := &wantM.Webhooks[i]
				if tc.change != nil {
					excluded := &w.NamespaceSelector.MatchExpressions[0].Values
					if w.NamespaceSelector.MatchExpressions[0].Operator == metav1.LabelSelectorOpIn {
						excluded = &[]string{} // the probe's webhook: olmguard's namespace only, whatever the values exclude
					}
					tc.change(&w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, excluded)
				}
			}
			for i := range wantV.Webhooks {
				w := &wantV.Webhooks[i]
				if tc.change != nil {
					tc.change(&w.ClientConfig, w.FailurePolicy, w.TimeoutSeconds, &w.NamespaceSelector.MatchExpressions[0].Values)
				}
			}
			objs := objects(t, charts.Options{Namespace: ns, Values: tc.values})
			gotM := typed[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", wantM.Name)
			gotV := typed[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", wantV.Name)
			if diff := cmp.Diff(wantM.Webhooks, gotM.Webhooks); diff != "" {
				t.Errorf("mutating webhooks (-Build +chart):\n%s", diff)
			}
			if diff := cmp.Diff(wantV.Webhooks, gotV.Webhooks); diff != "" {
				t.Errorf("validating webhooks (-Build +chart):\n%s", diff)
			}
		})
	}
}

// TestExamples renders every example and checks what it documents.
func TestExamples(t *testing.T) {
	checks := map[string]func(t *testing.T, objs []*unstructured.Unstructured){
		"cert-manager.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			certManager(t, objs, "Issuer", "olmguard-selfsigned")
		},
		"cert-manager-cluster-issuer.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			cert := certManager(t, objs, "ClusterIssuer", "internal-ca")
			if d, _, _ := unstructured.NestedString(cert.Object, "spec", "renewBefore"); d != "168h" {
				t.Errorf("renewBefore %q", d)
			}
			if find(objs, "Issuer", "olmguard-selfsigned") != nil {
				t.Error("a self-signed Issuer beside the ClusterIssuer")
			}
		},
		"existing-secret.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			wh := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook")
			if v := wh.Spec.Template.Spec.Volumes[1]; v.Secret == nil || v.Secret.SecretName != "olmguard-webhook-tls-own" {
				t.Errorf("volumes %+v", wh.Spec.Template.Spec.Volumes)
			}
			m := typed[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", "olmguard-mutating")
			for _, w := range m.Webhooks {
				if b, _ := pem.Decode(w.ClientConfig.CABundle); b == nil || b.Type != "CERTIFICATE" {
					t.Errorf("%s: caBundle is not a PEM certificate", w.Name)
				}
			}
			noSelfSigned(t, objs)
		},
		"catalog-trust.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			_, h := parseWebhook(t, args(t, objs, "olmguard-webhook"))
			if h.Policies.CatalogTrust != "enforce" || h.TrustedCatalogs.GlobalNamespace != "olm" ||
				!slices.Equal(h.TrustedCatalogs.Namespaces, []string{"platform-catalogs"}) || !slices.Equal(h.TrustedCatalogs.Registries, []string{"registry.example.com/catalogs"}) {
				t.Errorf("catalog trust %s, trusted %+v", h.Policies.CatalogTrust, h.TrustedCatalogs)
			}
		},
		"enforce.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			_, h := parseWebhook(t, args(t, objs, "olmguard-webhook"))
			p := h.Policies
			for name, m := range map[string]string{"mixed": string(p.MixedApproval), "duplicate": string(p.DuplicatePackage), "owner": string(p.InstallPlanOwnerDrop),
				"finalizer": string(p.CleanupFinalizer), "operatorgroups": string(p.OperatorGroups), "approval": string(p.Approval)} {
				if m != "enforce" {
					t.Errorf("policy %s: %s", name, m)
				}
			}
			v := typed[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", "olmguard-validating")
			for _, w := range v.Webhooks {
				if *w.FailurePolicy != admissionregistrationv1.Fail || *w.TimeoutSeconds != 10 {
					t.Errorf("%s: failurePolicy %s, timeout %d", w.Name, *w.FailurePolicy, *w.TimeoutSeconds)
				}
			}
			if r := *typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Replicas; r != 3 {
				t.Errorf("replicas %d", r)
			}
		},
		"controller-tuning.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			o, r := parseController(t, args(t, objs, "olmguard-controller"))
			if slices.Contains(o.Controllers, "subscription-drift") || !slices.Contains(o.Controllers, "webhook-probe") || len(o.Controllers) != 6 {
				t.Errorf("--controllers %v", o.Controllers)
			}
			if r.CatalogPods.Grace != 10*time.Second || r.CatalogPods.DeletionsPerMinute != 30 || string(r.CSVCleanup.OperandCleanup) != "always" ||
				r.CSVCleanup.Timeout != 20*time.Minute || !r.UnpackJobs.RetryFailed || r.UnpackJobs.RetryFailedAfter != 5*time.Minute || r.OLMAudit.Interval != 30*time.Minute || r.WebhookProbe.Interval != 30*time.Second || o.LeaseDuration != 15*time.Second {
				t.Errorf("options %+v %+v", o, r)
			}
		},
		"scheduling.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
				d := typed[appsv1.Deployment](t, objs, "Deployment", name)
				s := d.Spec.Template.Spec
				c := s.Containers[0]
				if c.Image != "registry.example.com/mirror/olmguard@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef" || c.ImagePullPolicy != "Always" {
					t.Errorf("%s: image %s %s", name, c.Image, c.ImagePullPolicy)
				}
				if _, ok := s.NodeSelector["node-role.kubernetes.io/infra"]; !ok || len(s.Tolerations) != 1 || len(s.ImagePullSecrets) != 1 || *s.SecurityContext.RunAsUser != 65532 {
					t.Errorf("%s: scheduling %+v", name, s)
				}
				if d.Labels["team"] != "platform" || s.PriorityClassName != "system-cluster-critical" {
					t.Errorf("%s: labels %v, priority class %q", name, d.Labels, s.PriorityClassName)
				}
			}
			if a := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec.Affinity; len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
				t.Errorf("webhook affinity %+v", a)
			}
			for _, o := range objs {
				if o.GetLabels()["team"] != "platform" || o.GetLabels()["app.kubernetes.io/name"] != "olmguard" {
					t.Errorf("%s %s labels %v", o.GetKind(), o.GetName(), o.GetLabels())
				}
			}
		},
		"namespaces.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			ns := find(objs, "Namespace", charts.DefaultNamespace)
			if ns == nil || ns.GetLabels()["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Fatalf("namespace %v", ns)
			}
			m := typed[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", "olmguard-mutating")
			sel := m.Webhooks[0].NamespaceSelector
			if got := sel.MatchExpressions[0].Values; !slices.Equal(got, []string{"kube-system", charts.DefaultNamespace, "openshift-operator-lifecycle-manager", "legacy-operators"}) {
				t.Errorf("excluded %v", got)
			}
			if len(sel.MatchExpressions) != 2 || sel.MatchExpressions[1].Key != "olmguard.io/ignore" {
				t.Errorf("selector %+v", sel)
			}
		},
		"monitoring.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			sm := find(objs, "ServiceMonitor", "olmguard")
			if sm == nil || sm.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Fatalf("ServiceMonitor %v", sm)
			}
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			if len(eps) != 1 || eps[0].(map[string]any)["interval"] != "15s" {
				t.Errorf("endpoints %v", eps)
			}
			pr := find(objs, "PrometheusRule", "olmguard")
			if pr == nil || pr.GetLabels()["release"] != "kube-prometheus-stack" {
				t.Fatalf("PrometheusRule %v", pr)
			}
			groups, _, _ := unstructured.NestedSlice(pr.Object, "spec", "groups")
			alerts := 0
			for _, g := range groups {
				rules, _ := g.(map[string]any)["rules"].([]any)
				for _, r := range rules {
					labels, _ := r.(map[string]any)["labels"].(map[string]any)
					if labels["team"] != "platform" || labels["severity"] == nil {
						t.Errorf("alert %v: labels %v, want team=platform beside its severity", r.(map[string]any)["alert"], labels)
					}
					alerts++
				}
			}
			if alerts == 0 {
				t.Error("the PrometheusRule has no alerts")
			}
		},
		"client-auth.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			opts, _ := parseWebhook(t, args(t, objs, "olmguard-webhook"))
			if opts.ClientCAFile != "/etc/olmguard/client-ca/ca.crt" || !slices.Equal(opts.ClientCNNames, []string{"kube-apiserver"}) {
				t.Errorf("--client-ca-file %q, --client-cn-names %v", opts.ClientCAFile, opts.ClientCNNames)
			}
			np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "olmguard-webhook")
			if from := np.Spec.Ingress[0].From; len(from) != 1 || from[0].IPBlock == nil || from[0].IPBlock.CIDR != "10.0.0.0/24" {
				t.Errorf("webhook port open to %+v", from)
			}
		},
		"small.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, kind := range []string{"PodDisruptionBudget", "NetworkPolicy"} {
				if slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind }) {
					t.Errorf("a %s with one replica each", kind)
				}
			}
			if s := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec; s.PriorityClassName != "" || *typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-controller").Spec.Replicas != 1 {
				t.Errorf("priority class %q", s.PriorityClassName)
			}
		},
	}
	for _, ex := range examples(t) {
		t.Run(ex.name, func(t *testing.T) {
			check, ok := checks[ex.name]
			if !ok {
				t.Fatalf("no check for examples/%s: add one to TestExamples", ex.name)
			}
			objs := objects(t, charts.Options{Values: ex.values})
			parseWebhook(t, args(t, objs, "olmguard-webhook"))
			parseController(t, args(t, objs, "olmguard-controller"))
			check(t, objs)
		})
	}
}

// certManager checks a cert-manager render: a Certificate from the given issuer, mounted into the
// webhook, the CA injection annotation, and nothing of the self-signed mode.
func certManager(t *testing.T, objs []*unstructured.Unstructured, issuerKind, issuerName string) *unstructured.Unstructured {
	t.Helper()
	cert := find(objs, "Certificate", "olmguard-webhook")
	if cert == nil {
		t.Fatal("no Certificate")
	}
	ref, _, _ := unstructured.NestedStringMap(cert.Object, "spec", "issuerRef")
	if ref["kind"] != issuerKind || ref["name"] != issuerName {
		t.Errorf("issuerRef %v", ref)
	}
	opts, _ := parseWebhook(t, args(t, objs, "olmguard-webhook"))
	if opts.SelfSigned || opts.CertDir != "/etc/olmguard/tls" {
		t.Errorf("webhook options %+v", opts)
	}
	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetAnnotations()["cert-manager.io/inject-ca-from"] != charts.DefaultNamespace+"/olmguard-webhook" {
				t.Errorf("%s annotations %v", kind, o.GetAnnotations())
			}
		}
	}
	noSelfSigned(t, objs)
	return cert
}

func noSelfSigned(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	if find(objs, "Role", "olmguard-webhook-certificates") != nil || find(objs, "ClusterRole", "olmguard-webhook-ca-injection") != nil {
		t.Error("the self-signed mode's RBAC is rendered")
	}
}

// TestSchemaRejects: values.schema.json refuses bad values, naming the value and what is wrong.
func TestSchemaRejects(t *testing.T) {
	ch := load(t)
	for _, tc := range []struct {
		name   string
		values string
		want   []string
	}{
		{"unknown policy mode", `{webhook: {policies: {approval: deny}}}`, []string{"/webhook/policies/approval", "'enforce', 'warn', 'off'"}},
		{"a registry without a host", `{webhook: {catalogTrust: {registries: [library]}}}`, []string{"/webhook/catalogTrust/registries/0"}},
		{"a namespace that is no name", `{webhook: {catalogTrust: {namespaces: [Bad_NS]}}}`, []string{"/webhook/catalogTrust/namespaces/0"}},
		{"negative webhook replicas", `{webhook: {replicas: -1}}`, []string{"/webhook/replicas", "minimum"}},
		{"negative controller replicas", `{controller: {replicas: -2}}`, []string{"/controller/replicas", "minimum"}},
		{"replicas not a number", `{webhook: {replicas: two}}`, []string{"/webhook/replicas", "integer"}},
		{"bad pullPolicy", `{image: {pullPolicy: always}}`, []string{"/image/pullPolicy", "'Always', 'IfNotPresent', 'Never'"}},
		{"unknown certificate mode", `{certificate: {mode: vault}}`, []string{"/certificate/mode", "'selfSigned', 'certManager', 'existingSecret'"}},
		{"unknown top-level value", `{replicas: 3}`, []string{"additional properties 'replicas' not allowed"}},
		{"unknown nested value", `{webhook: {policy: {approval: warn}}}`, []string{"/webhook", "additional properties 'policy' not allowed"}},
		{"existingSecret without a Secret", `{certificate: {mode: existingSecret}}`, []string{"/certificate/existingSecret/name", "/certificate/existingSecret/caBundle"}},
		{"failurePolicy in lower case", `{webhook: {failurePolicy: ignore}}`, []string{"/webhook/failurePolicy", "'Ignore', 'Fail'"}},
		{"timeout above 30 s", `{webhook: {timeoutSeconds: 31}}`, []string{"/webhook/timeoutSeconds", "maximum"}},
		{"duration without a unit", `{controller: {catalogPods: {grace: 30}}}`, []string{"/controller/catalogPods/grace", "string"}},
		{"duration of words", `{controller: {csvCleanup: {timeout: ten minutes}}}`, []string{"/controller/csvCleanup/timeout", "does not match pattern"}},
		{"webhook probe interval of words", `{controller: {webhookProbe: {interval: every minute}}}`, []string{"/controller/webhookProbe/interval", "does not match pattern"}},
		{"webhook probe switch not a boolean", `{controller: {reconcilers: {webhookProbe: "no"}}}`, []string{"/controller/reconcilers/webhookProbe", "boolean"}},
		{"unknown operand cleanup", `{controller: {csvCleanup: {operandCleanup: sometimes}}}`, []string{"/controller/csvCleanup/operandCleanup", "'opt-in', 'always', 'never'"}},
		{"root pods", `{podSecurityContext: {runAsNonRoot: false}}`, []string{"/podSecurityContext/runAsNonRoot", "true"}},
		{"unconfined seccomp", `{podSecurityContext: {seccompProfile: {type: Unconfined}}}`, []string{"/podSecurityContext/seccompProfile/type"}},
		{"issuer kind", `{certificate: {mode: certManager, certManager: {issuerRef: {name: x, kind: Vault}}}}`, []string{"/certificate/certManager/issuerRef/kind"}},
		{"tagged repository", `{image: {repository: "ghcr.io/olmguard/olmguard:v1"}}`, []string{"/image/repository"}},
		{"flag without dashes", `{controller: {extraArgs: [drift-window=1m]}}`, []string{"/controller/extraArgs/0"}},
		{"excluded namespace not a name", `{webhook: {excludeNamespaces: [Kube_System]}}`, []string{"/webhook/excludeNamespaces/0"}},
		{"alert label not a Prometheus label", `{prometheusRule: {alertLabels: {team-name: platform}}}`, []string{"/prometheusRule/alertLabels", "team-name"}},
		{"alert label not a string", `{prometheusRule: {alertLabels: {tier: 1}}}`, []string{"/prometheusRule/alertLabels/tier", "string"}},
		{"PrometheusRule switch not a boolean", `{prometheusRule: {enabled: "yes"}}`, []string{"/prometheusRule/enabled", "boolean"}},
		{"a webhook CIDR that is an address", `{networkPolicy: {webhookIngressCIDRs: [10.0.0.1]}}`, []string{"/networkPolicy/webhookIngressCIDRs/0"}},
		{"a webhook CIDR with a bad prefix", `{networkPolicy: {webhookIngressCIDRs: [10.0.0.0/33]}}`, []string{"/networkPolicy/webhookIngressCIDRs/0"}},
		{"a webhook CIDR of words", `{networkPolicy: {webhookIngressCIDRs: [control-plane]}}`, []string{"/networkPolicy/webhookIngressCIDRs/0"}},
		{"client auth without a CA", `{webhook: {clientAuth: {enabled: true}}}`, []string{"/webhook/clientAuth"}},
		{"client auth CA of another kind", `{webhook: {clientAuth: {enabled: true, caSource: {kind: File, name: ca}}}}`, []string{"/webhook/clientAuth/caSource/kind", "'ConfigMap', 'Secret'"}},
		{"a CommonName with a comma", `{webhook: {clientAuth: {commonNames: ["a,b"]}}}`, []string{"/webhook/clientAuth/commonNames/0"}},
		{"negative in-flight cap", `{webhook: {maxInflightRequests: -1}}`, []string{"/webhook/maxInflightRequests", "minimum"}},
		{"shared namespace switch not a boolean", `{allowSharedNamespace: "yes"}`, []string{"/allowSharedNamespace", "boolean"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &vals); err != nil {
				t.Fatal(err)
			}
			_, err := charts.Templates(ch, charts.Options{Values: vals})
			if err == nil {
				t.Fatalf("%s accepted", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q:\n%v", w, err)
				}
			}
		})
	}
	// And the templates' own checks, which the schema cannot express clearly.
	for values, want := range map[string]string{
		`{controller: {reconcilers: {installPlanOwners: false, subscriptionDrift: false, csvCleanup: false, unpackJobs: false, catalogPods: false, olmAudit: false, webhookProbe: false}}}`: "controller.reconcilers: enable at least one reconciler",
		`{commonLabels: {app.kubernetes.io/name: other}}`: "commonLabels: app.kubernetes.io/name is olmguard's own label",
	} {
		vals := map[string]any{}
		if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
			t.Fatal(err)
		}
		if _, err := charts.Templates(ch, charts.Options{Values: vals}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", values, err, want)
		}
	}
}

// TestSync: the kustomize tree and the chart's webhook configurations are what `make manifests`
// writes from the chart and the admission table, and every overlay renders the same objects as
// the chart with the same values.
func TestSync(t *testing.T) {
	if err := charts.CheckSync("..", admit.Webhooks(setup.DefaultWebhook().Admission())); err != nil {
		t.Error(err)
	}
}

// TestSyncDetectsHandEdits: a hand edit of either side, in a copy of the checkout, breaks the sync.
func TestSyncDetectsHandEdits(t *testing.T) {
	hooks := admit.Webhooks(setup.DefaultWebhook().Admission())
	edit := func(file, old, new string) func(t *testing.T, root string) {
		return func(t *testing.T, root string) {
			p := filepath.Join(root, file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), old) {
				t.Fatalf("%s has no %q", file, old)
			}
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, root string)
		want   []string
	}{
		{"base Deployment edited", edit("manifests/base/webhook.yaml", "replicas: 2", "replicas: 3"),
			[]string{"manifests/base/webhook.yaml differs", "kustomize's self-signed differs"}},
		{"overlay patch edited", edit("manifests/overlays/cert-manager/kustomization.yaml", "--cert-dir=/etc/olmguard/tls", "--cert-dir=/tls"),
			[]string{"manifests/overlays/cert-manager/kustomization.yaml differs", "kustomize's cert-manager differs"}},
		{"component edited", edit("manifests/components/servicemonitor/servicemonitor.yaml", "interval: 30s", "interval: 1m"),
			[]string{"manifests/components/servicemonitor/servicemonitor.yaml differs", "kustomize's self-signed+servicemonitor differs"}},
		{"alert edited in the component", edit("manifests/components/prometheusrule/prometheusrule.yaml", "for: 15m", "for: 30m"),
			[]string{"manifests/components/prometheusrule/prometheusrule.yaml differs", "kustomize's self-signed+servicemonitor+prometheusrule differs"}},
		{"chart rules file edited", edit("charts/olmguard/rules/olmguard.rules.yaml", "for: 15m", "for: 30m"),
			[]string{"manifests/components/prometheusrule/prometheusrule.yaml differs", "kustomize's cert-manager+servicemonitor+prometheusrule differs"}},
		{"file added to the base", func(t *testing.T, root string) {
			if err := os.WriteFile(filepath.Join(root, "manifests/base/extra.yaml"), []byte("kind: ConfigMap\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"manifests/base/extra.yaml is not generated"}},
		{"chart template edited", edit("charts/olmguard/templates/controller.yaml", "initialDelaySeconds: 15", "initialDelaySeconds: 30"),
			[]string{"manifests/base/controller.yaml differs", "kustomize's self-signed differs"}},
		{"chart default edited", edit("charts/olmguard/values.yaml", "  timeoutSeconds: 3", "  timeoutSeconds: 5"),
			[]string{"manifests/base/webhook-configurations.yaml differs", "kustomize's cert-manager differs"}},
		{"generated webhook template edited", edit("charts/olmguard/templates/webhook-configurations.yaml", "    - CREATE\n    - UPDATE\n", "    - CREATE\n"),
			[]string{"charts/olmguard/templates/webhook-configurations.yaml differs", "kustomize's self-signed differs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := copyCheckout(t)
			if err := charts.CheckSync(root, hooks); err != nil {
				t.Fatalf("the unchanged copy is out of sync: %v", err)
			}
			tc.change(t, root)
			err := charts.CheckSync(root, hooks)
			if err == nil {
				t.Fatal("the edit went unnoticed")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

// copyCheckout copies the chart and the kustomize tree into a temporary module root.
func copyCheckout(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, dir := range []string{charts.Dir, "manifests/base", "manifests/overlays", "manifests/components"} {
		if err := os.CopyFS(filepath.Join(root, dir), os.DirFS(filepath.Join("..", dir))); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestPackage packages the chart as `make dist` does and loads the archive back: the release's
// version, appVersion and image repository, and it renders that image.
func TestPackage(t *testing.T) {
	p, err := charts.Package(t.TempDir(), "v1.2.3-rc.1", "registry.example.com/olmguard")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(p) != "olmguard-1.2.3-rc.1.tgz" {
		t.Errorf("archive %s", p)
	}
	ch, err := loader.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != "1.2.3-rc.1" || ch.Metadata.AppVersion != "v1.2.3-rc.1" || ch.Schema == nil || len(ch.Templates) != len(load(t).Templates) {
		t.Errorf("packaged chart %+v, %d templates", ch.Metadata, len(ch.Templates))
	}
	objs, err := charts.Objects(ch, charts.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if img := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-controller").Spec.Template.Spec.Containers[0].Image; img != "registry.example.com/olmguard:v1.2.3-rc.1" {
		t.Errorf("image %s", img)
	}
}

// TestKustomizeApplyOrder: kubectl apply -k keeps the generated files' order, so each overlay
// creates the namespace before anything in it and registers the webhooks after the Deployments.
func TestKustomizeApplyOrder(t *testing.T) {
	for _, overlay := range manifests.Overlays {
		objs, err := manifests.Objects(overlay, "", "servicemonitor")
		if err != nil {
			t.Fatal(err)
		}
		if objs[0].GetKind() != "Namespace" {
			t.Errorf("%s: the first object is %s %s, not the Namespace", overlay, objs[0].GetKind(), objs[0].GetName())
		}
		lastDeployment := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool {
			return o.GetName() == "olmguard-controller" && o.GetKind() == "Deployment"
		})
		firstWebhooks := slices.IndexFunc(objs, func(o *unstructured.Unstructured) bool { return strings.HasSuffix(o.GetKind(), "WebhookConfiguration") })
		if lastDeployment < 0 || firstWebhooks < lastDeployment {
			t.Errorf("%s: webhook configurations at %d, before the controller's Deployment at %d", overlay, firstWebhooks, lastDeployment)
		}
	}
}
