package charts_test

import (
	"encoding/base64"
	"encoding/pem"
	"flag"
	"maps"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
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
			if pdb := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "olmguard-webhook").Spec; pdb.MinAvailable == nil || *pdb.MinAvailable != intstr.FromInt32(2) || pdb.MaxUnavailable != nil {
				t.Errorf("webhook disruption budget %+v", pdb)
			}
			if pdb := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "olmguard-controller").Spec; pdb.MaxUnavailable == nil || *pdb.MaxUnavailable != intstr.FromString("50%") || pdb.MinAvailable != nil {
				t.Errorf("controller disruption budget %+v", pdb)
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
				t.Fatalf("endpoints %v", eps)
			}
			ep := eps[0].(map[string]any)
			want := map[string]any{
				"port": "metrics", "interval": "15s", "scrapeTimeout": "10s", "scheme": "https",
				"authorization":     map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "olmguard-metrics-token", "key": "token"}},
				"tlsConfig":         map[string]any{"insecureSkipVerify": true},
				"relabelings":       []any{map[string]any{"targetLabel": "cluster", "replacement": "prod-eu-1", "action": "replace"}},
				"metricRelabelings": []any{map[string]any{"sourceLabels": []any{"__name__"}, "regex": "go_.*", "action": "drop"}},
			}
			if diff := cmp.Diff(want, ep); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
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
		"pods.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
				d := typed[appsv1.Deployment](t, objs, "Deployment", name)
				pod := d.Spec.Template
				if pod.Annotations["sidecar.istio.io/inject"] != "false" || pod.Labels["cost-centre"] != "platform" {
					t.Errorf("%s: pod annotations %v, labels %v", name, pod.Annotations, pod.Labels)
				}
				if !labels.SelectorFromSet(d.Spec.Selector.MatchLabels).Matches(labels.Set(pod.Labels)) {
					t.Errorf("%s: selector %v does not select its pods %v", name, d.Spec.Selector.MatchLabels, pod.Labels)
				}
				tsc := pod.Spec.TopologySpreadConstraints
				if len(tsc) != 1 || tsc[0].TopologyKey != "topology.kubernetes.io/zone" || tsc[0].LabelSelector == nil ||
					!maps.Equal(tsc[0].LabelSelector.MatchLabels, d.Spec.Selector.MatchLabels) {
					t.Errorf("%s: topology spread %+v, want the zone and the pods' selector %v", name, tsc, d.Spec.Selector.MatchLabels)
				}
				c := pod.Spec.Containers[0]
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				if env["HTTPS_PROXY"] != "http://proxy.example.com:3128" || env["NO_PROXY"] == "" || c.Env[0].Name != "GOMEMLIMIT" {
					t.Errorf("%s: env %+v", name, c.Env)
				}
				sc := c.SecurityContext
				if sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
					sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
					t.Errorf("%s: container security context %+v", name, sc)
				}
			}
		},
		"registry.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
				if img := typed[appsv1.Deployment](t, objs, "Deployment", name).Spec.Template.Spec.Containers[0].Image; img != "mirror.example.com:5000/olmguard/olmguard:v0.1.0" {
					t.Errorf("%s: image %s", name, img)
				}
			}
		},
		"host-network.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			if port := webhookPort(t, objs); port != 10260 {
				t.Errorf("webhook port %d", port)
			}
			if s := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec; !s.HostNetwork || s.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
				t.Errorf("hostNetwork %v, dnsPolicy %s", s.HostNetwork, s.DNSPolicy)
			}
			if s := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-controller").Spec.Template.Spec; s.HostNetwork {
				t.Error("the controller on the host network")
			}
			for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				for _, o := range objs {
					if o.GetKind() == kind && o.GetAnnotations()["admissions.enforcer/disabled"] != "true" {
						t.Errorf("%s annotations %v", kind, o.GetAnnotations())
					}
				}
			}
		},
		"openshift.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			args := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec.Containers[0].Args
			for _, want := range []string{"--global-catalog-namespace=openshift-marketplace", "--policy-catalog-trust=enforce"} {
				if !slices.Contains(args, want) {
					t.Errorf("webhook args %v lack %s", args, want)
				}
			}
			for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
				if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind }) {
					t.Errorf("no %s for the user-workload Prometheus", kind)
				}
			}
		},
		"small.yaml": func(t *testing.T, objs []*unstructured.Unstructured) {
			for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
				typed[appsv1.Deployment](t, objs, "Deployment", name) // fullnameOverride: olmguard keeps the names
			}
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
		{"uninstall hook switch not a boolean", `{uninstallHook: {enabled: "no"}}`, []string{"/uninstallHook/enabled", "boolean"}},
		{"uninstall hook timeout too short", `{uninstallHook: {timeoutSeconds: 5}}`, []string{"/uninstallHook/timeoutSeconds", "minimum"}},
		{"uninstall hook stop timeout of words", `{uninstallHook: {stopTimeout: two minutes}}`, []string{"/uninstallHook/stopTimeout", "does not match pattern"}},
		{"client auth CA of another kind", `{webhook: {clientAuth: {enabled: true, caSource: {kind: File, name: ca}}}}`, []string{"/webhook/clientAuth/caSource/kind", "'ConfigMap', 'Secret'"}},
		{"a CommonName with a comma", `{webhook: {clientAuth: {commonNames: ["a,b"]}}}`, []string{"/webhook/clientAuth/commonNames/0"}},
		{"negative in-flight cap", `{webhook: {maxInflightRequests: -1}}`, []string{"/webhook/maxInflightRequests", "minimum"}},
		{"shared namespace switch not a boolean", `{allowSharedNamespace: "yes"}`, []string{"/allowSharedNamespace", "boolean"}},
		{"registry with a scheme", `{image: {registry: "https://mirror.example.com"}}`, []string{"/image/registry", "does not match pattern"}},
		{"registry with a tag", `{image: {registry: "mirror.example.com/olmguard:v1"}}`, []string{"/image/registry"}},
		{"global registry not a string", `{global: {imageRegistry: [mirror.example.com]}}`, []string{"/global/imageRegistry", "string"}},
		{"both disruption budgets", `{webhook: {podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}}}`, []string{"/webhook/podDisruptionBudget", "'not' failed"}},
		{"disruption budget of a fraction", `{controller: {podDisruptionBudget: {maxUnavailable: "0.5"}}}`, []string{"/controller/podDisruptionBudget/maxUnavailable"}},
		{"negative disruption budget", `{webhook: {podDisruptionBudget: {minAvailable: -1}}}`, []string{"/webhook/podDisruptionBudget/minAvailable"}},
		{"unknown disruption budget field", `{webhook: {podDisruptionBudget: {enabled: false}}}`, []string{"/webhook/podDisruptionBudget", "additional properties 'enabled' not allowed"}},
		{"metrics port below 1024", `{webhook: {metricsPort: 80}}`, []string{"/webhook/metricsPort", "minimum"}},
		{"probe port above 65535", `{webhook: {probePort: 70000}}`, []string{"/webhook/probePort", "maximum"}},
		{"privileged webhook port", `{webhook: {port: 443}}`, []string{"/webhook/port", "minimum"}},
		{"webhook port as a string", `{webhook: {port: "9443"}}`, []string{"/webhook/port", "integer"}},
		{"hostNetwork not a boolean", `{webhook: {hostNetwork: "true"}}`, []string{"/webhook/hostNetwork", "boolean"}},
		{"webhook configuration annotation not a string", `{webhook: {configurationAnnotations: {admissions.enforcer/disabled: true}}}`, []string{"/webhook/configurationAnnotations/admissions.enforcer~1disabled", "string"}},
		{"webhook configuration annotation of cert-manager", `{webhook: {configurationAnnotations: {cert-manager.io/inject-ca-from: other/ca}}}`, []string{"/webhook/configurationAnnotations/cert-manager.io~1inject-ca-from"}},
		{"scrape timeout without a unit", `{serviceMonitor: {scrapeTimeout: 10}}`, []string{"/serviceMonitor/scrapeTimeout", "string"}},
		{"scrape timeout in Go's microseconds", `{serviceMonitor: {scrapeTimeout: 500us}}`, []string{"/serviceMonitor/scrapeTimeout", "does not match pattern"}},
		{"relabeling of an unknown action", `{serviceMonitor: {relabelings: [{action: rename}]}}`, []string{"/serviceMonitor/relabelings/0/action"}},
		{"metric relabeling with a misspelt field", `{serviceMonitor: {metricRelabelings: [{source_labels: [__name__]}]}}`, []string{"/serviceMonitor/metricRelabelings/0", "source_labels"}},
		{"TLS config of an unknown field", `{serviceMonitor: {tlsConfig: {caFile: /etc/ca.crt}}}`, []string{"/serviceMonitor/tlsConfig", "caFile"}},
		{"credentials without a key", `{serviceMonitor: {authorization: {credentials: {name: olmguard-metrics-token}}}}`, []string{"/serviceMonitor/authorization/credentials"}},
		{"basic authorization", `{serviceMonitor: {authorization: {type: Basic, credentials: {name: s, key: k}}}}`, []string{"/serviceMonitor/authorization/type"}},
		{"bearer token file", `{serviceMonitor: {bearerTokenFile: /token}}`, []string{"/serviceMonitor", "bearerTokenFile"}},
		{"pod label of Helm's", `{webhook: {podLabels: {helm.sh/chart: other}}}`, []string{"/webhook/podLabels/helm.sh~1chart"}},
		{"fullnameOverride not a string", `{fullnameOverride: [guard]}`, []string{"/fullnameOverride", "string"}},
		{"pod label replacing the selector's", `{webhook: {podLabels: {app.kubernetes.io/component: other}}}`, []string{"/webhook/podLabels/app.kubernetes.io~1component"}},
		{"pod label replacing the name", `{controller: {podLabels: {app.kubernetes.io/name: other}}}`, []string{"/controller/podLabels/app.kubernetes.io~1name"}},
		{"pod label value not a string", `{webhook: {podLabels: {tier: 1}}}`, []string{"/webhook/podLabels/tier", "string"}},
		{"pod annotation value not a string", `{controller: {podAnnotations: {sidecar.istio.io/inject: false}}}`, []string{"/controller/podAnnotations/sidecar.istio.io~1inject", "string"}},
		{"topology spread without a key", `{webhook: {topologySpreadConstraints: [{maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}}`, []string{"/webhook/topologySpreadConstraints/0", "topologyKey"}},
		{"topology spread of an unknown policy", `{controller: {topologySpreadConstraints: [{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes}]}}`, []string{"/controller/topologySpreadConstraints/0/whenUnsatisfiable"}},
		{"env without a name", `{webhook: {extraEnv: [{value: "http://proxy:3128"}]}}`, []string{"/webhook/extraEnv/0", "name"}},
		{"env as a map", `{controller: {extraEnv: {HTTPS_PROXY: "http://proxy:3128"}}}`, []string{"/controller/extraEnv", "array"}},
		{"env replacing GOMEMLIMIT", `{webhook: {extraEnv: [{name: GOMEMLIMIT, value: 1GiB}]}}`, []string{"/webhook/extraEnv/0/name"}},
		{"privilege escalation", `{containerSecurityContext: {allowPrivilegeEscalation: true}}`, []string{"/containerSecurityContext/allowPrivilegeEscalation"}},
		{"privileged containers", `{containerSecurityContext: {privileged: true}}`, []string{"/containerSecurityContext/privileged"}},
		{"capabilities not dropped", `{containerSecurityContext: {capabilities: {drop: [NET_RAW]}}}`, []string{"/containerSecurityContext/capabilities/drop"}},
		{"a capability added", `{containerSecurityContext: {capabilities: {add: [NET_ADMIN]}}}`, []string{"/containerSecurityContext/capabilities/add/0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.values)
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
	// And the templates' own checks, which the schema cannot express clearly or which hold even
	// with --skip-schema-validation.
	for values, want := range map[string]string{
		`{controller: {reconcilers: {installPlanOwners: false, subscriptionDrift: false, csvCleanup: false, unpackJobs: false, catalogPods: false, olmAudit: false, webhookProbe: false}}}`: "controller.reconcilers: enable at least one reconciler",
		`{commonLabels: {app.kubernetes.io/name: other}}`:                                   "commonLabels: app.kubernetes.io/name is olmguard's own label",
		`{commonLabels: {app.kubernetes.io/managed-by: kubectl}}`:                           "commonLabels: app.kubernetes.io/managed-by is olmguard's own label",
		`{fullnameOverride: guard}`:                                                         `fullnameOverride "guard": olmguard's object names are fixed`,
		`{webhook: {port: 8080}}`:                                                           "webhook.port 8080, webhook.metricsPort 8080 and webhook.probePort 8081 must differ",
		`{webhook: {hostNetwork: true, port: 10260, metricsPort: 10261, probePort: 10261}}`: "webhook.port 10260, webhook.metricsPort 10261 and webhook.probePort 10261 must differ",
	} {
		vals := yamlValues(t, values)
		if _, err := charts.Templates(ch, charts.Options{Values: vals}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", values, err, want)
		}
	}
	for values, want := range map[string]string{
		`{webhook: {extraEnv: [{name: GOMEMLIMIT, value: 1GiB}]}}`:                                                            "extraEnv: GOMEMLIMIT is set by the chart",
		`{webhook: {podLabels: {app.kubernetes.io/component: other}}}`:                                                        "webhook.podLabels: app.kubernetes.io/component is olmguard's own label",
		`{controller: {podLabels: {app.kubernetes.io/name: other}}}`:                                                          "controller.podLabels: app.kubernetes.io/name is olmguard's own label",
		`{commonLabels: {app.kubernetes.io/component: other}}`:                                                                "commonLabels: app.kubernetes.io/component is olmguard's own label",
		`{controller: {podDisruptionBudget: {minAvailable: 1, maxUnavailable: 1}}}`:                                           "controller.podDisruptionBudget: set minAvailable or maxUnavailable, not both",
		`{certificate: {mode: certManager}, webhook: {configurationAnnotations: {cert-manager.io/inject-ca-from: other/ca}}}`: "webhook.configurationAnnotations: cert-manager.io/inject-ca-from is the chart's",
	} {
		vals := yamlValues(t, values)
		if _, err := charts.Templates(ch, charts.Options{Values: vals, SkipSchemaValidation: true}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("without the schema, %s: %v, want an error saying %q", values, err, want)
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

// TestContainerSecurityContextDefault: without containerSecurityContext, both containers keep the
// restricted context the chart always had.
func TestContainerSecurityContextDefault(t *testing.T) {
	objs := objects(t, charts.Options{})
	for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
		sc := typed[appsv1.Deployment](t, objs, "Deployment", name).Spec.Template.Spec.Containers[0].SecurityContext
		want := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
		if diff := cmp.Diff(want, sc); diff != "" {
			t.Errorf("%s: container security context (-want +got):\n%s", name, diff)
		}
	}
}

// TestImageRegistry: image.registry, else global.imageRegistry, replaces the repository's registry
// host (or goes before a repository without one); other global values change nothing.
func TestImageRegistry(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		want   string
	}{
		{"defaults", `{}`, "ghcr.io/olmguard/olmguard:v0.1.0"},
		{"other global values", `{global: {storageClass: fast, imagePullSecrets: [x]}}`, "ghcr.io/olmguard/olmguard:v0.1.0"},
		{"image registry", `{image: {registry: mirror.example.com}}`, "mirror.example.com/olmguard/olmguard:v0.1.0"},
		{"global registry", `{global: {imageRegistry: "mirror.example.com:5000"}}`, "mirror.example.com:5000/olmguard/olmguard:v0.1.0"},
		{"image registry wins", `{global: {imageRegistry: global.example.com}, image: {registry: own.example.com}}`, "own.example.com/olmguard/olmguard:v0.1.0"},
		{"registry with a path and a slash", `{image: {registry: registry.example.com/mirror/}}`, "registry.example.com/mirror/olmguard/olmguard:v0.1.0"},
		{"repository without a host", `{image: {registry: mirror.example.com, repository: team/olmguard}}`, "mirror.example.com/team/olmguard:v0.1.0"},
		{"localhost repository", `{image: {registry: mirror.example.com, repository: localhost/olmguard}}`, "mirror.example.com/olmguard:v0.1.0"},
		{"digest", `{global: {imageRegistry: mirror.example.com}, image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}`,
			"mirror.example.com/olmguard/olmguard@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.values)
			objs := objects(t, charts.Options{Values: vals})
			for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
				if img := typed[appsv1.Deployment](t, objs, "Deployment", name).Spec.Template.Spec.Containers[0].Image; img != tc.want {
					t.Errorf("%s: image %s, want %s", name, img, tc.want)
				}
			}
		})
	}
}

// TestPodDisruptionBudgets: minAvailable 1 by default; minAvailable or maxUnavailable as set,
// including 0.
func TestPodDisruptionBudgets(t *testing.T) {
	one, zero := intstr.FromInt32(1), intstr.FromInt32(0)
	for _, tc := range []struct {
		name     string
		values   string
		min, max *intstr.IntOrString
	}{
		{"defaults", `{}`, &one, nil},
		{"minAvailable 0", `{webhook: {podDisruptionBudget: {minAvailable: 0}}, controller: {podDisruptionBudget: {minAvailable: 0}}}`, &zero, nil},
		{"maxUnavailable", `{webhook: {podDisruptionBudget: {maxUnavailable: 1}}, controller: {podDisruptionBudget: {maxUnavailable: 1}}}`, nil, &one},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.values)
			objs := objects(t, charts.Options{Values: vals})
			for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
				spec := typed[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", name).Spec
				if diff := cmp.Diff(tc.min, spec.MinAvailable); diff != "" {
					t.Errorf("%s minAvailable (-want +got):\n%s", name, diff)
				}
				if diff := cmp.Diff(tc.max, spec.MaxUnavailable); diff != "" {
					t.Errorf("%s maxUnavailable (-want +got):\n%s", name, diff)
				}
			}
		})
	}
}

// webhookPort is the port the webhook listens on, checked to be the same everywhere: its --port
// as cmd/webhook parses it, the container port named https, the port the Service's targetPort
// names, and the port the webhook's NetworkPolicy admits (when rendered).
func webhookPort(t *testing.T, objs []*unstructured.Unstructured) int {
	t.Helper()
	opts, _ := parseWebhook(t, args(t, objs, "olmguard-webhook"))
	c := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec.Containers[0]
	svc := typed[corev1.Service](t, objs, "Service", "olmguard-webhook")
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 {
		t.Fatalf("webhook Service ports %+v", svc.Spec.Ports)
	}
	target := svc.Spec.Ports[0].TargetPort
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool {
		return (target.Type == intstr.String && p.Name == target.StrVal) || (target.Type == intstr.Int && p.ContainerPort == target.IntVal)
	})
	if i < 0 {
		t.Fatalf("the Service's targetPort %s is no port of the container %+v", target.String(), c.Ports)
	}
	if int(c.Ports[i].ContainerPort) != opts.Port {
		t.Errorf("the Service targets container port %d, the webhook listens on --port=%d", c.Ports[i].ContainerPort, opts.Port)
	}
	listens := map[string]int{"https": opts.Port}
	for name, addr := range map[string]string{"metrics": opts.MetricsBindAddress, "probes": opts.HealthProbeBindAddress} {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatalf("%s address %q: %v", name, addr, err)
		}
		listens[name], _ = strconv.Atoi(port)
	}
	for name, port := range listens {
		i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == name })
		if i < 0 || int(c.Ports[i].ContainerPort) != port {
			t.Errorf("container port %s: %+v, the webhook listens on %d", name, c.Ports, port)
		}
	}
	if p := c.ReadinessProbe.HTTPGet.Port; p.StrVal != "probes" {
		t.Errorf("readiness probe on port %s", p.String())
	}
	if ms := typed[corev1.Service](t, objs, "Service", "olmguard-webhook-metrics"); ms.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Errorf("metrics Service targets %s", ms.Spec.Ports[0].TargetPort.String())
	}
	if find(objs, "NetworkPolicy", "olmguard-webhook") != nil {
		np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", "olmguard-webhook")
		admitted := map[int]bool{}
		for _, rule := range np.Spec.Ingress {
			for _, p := range rule.Ports {
				admitted[p.Port.IntValue()] = true
			}
		}
		if p := np.Spec.Ingress[0].Ports[0].Port; p == nil || p.IntValue() != opts.Port {
			t.Errorf("the NetworkPolicy's first rule admits port %v, the webhook listens on %d", p, opts.Port)
		}
		for name, port := range listens {
			if !admitted[port] || len(admitted) != 3 {
				t.Errorf("the NetworkPolicy admits %v, not exactly the %s port %d and the others of %v", admitted, name, port, listens)
			}
		}
	}
	return opts.Port
}

// TestWebhookPort: webhook.port is the port the webhook listens on, its container port, the
// Service's target and the NetworkPolicy's, with and without hostNetwork (which also sets the DNS
// policy a host-network pod needs to resolve cluster names).
func TestWebhookPort(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		port   int
		host   bool
	}{
		{"defaults", `{}`, 9443, false},
		{"another port", `{webhook: {port: 10443}}`, 10443, false},
		{"host network", `{webhook: {hostNetwork: true, port: 10260}}`, 10260, true},
		{"host network, CIDRs", `{webhook: {hostNetwork: true, port: 10260}, networkPolicy: {webhookIngressCIDRs: [10.0.0.0/24]}}`, 10260, true},
		{"host network, own metrics and probe ports", `{webhook: {hostNetwork: true, port: 10260, metricsPort: 10261, probePort: 10262}, networkPolicy: {webhookIngressCIDRs: [10.0.0.0/24]}}`, 10260, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.values)
			objs := objects(t, charts.Options{Values: vals})
			if port := webhookPort(t, objs); port != tc.port {
				t.Errorf("port %d, want %d", port, tc.port)
			}
			s := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec
			wantDNS := corev1.DNSPolicy("")
			if tc.host {
				wantDNS = corev1.DNSClusterFirstWithHostNet
			}
			if s.HostNetwork != tc.host || s.DNSPolicy != wantDNS {
				t.Errorf("hostNetwork %v, dnsPolicy %q", s.HostNetwork, s.DNSPolicy)
			}
			// A surge pod cannot share a node with the pod it replaces on the host network.
			ru := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Strategy.RollingUpdate
			wantSurge, wantUnavailable := intstr.FromInt32(1), intstr.FromInt32(0)
			if tc.host {
				wantSurge, wantUnavailable = wantUnavailable, wantSurge
			}
			if *ru.MaxSurge != wantSurge || *ru.MaxUnavailable != wantUnavailable {
				t.Errorf("rolling update maxSurge %s, maxUnavailable %s", ru.MaxSurge.String(), ru.MaxUnavailable.String())
			}
		})
	}
}

// TestServiceMonitorCredentials: without credentials, Prometheus' own token (bearerTokenFile, as
// before); with a Secret, authorization from it and no bearerTokenFile.
func TestServiceMonitorCredentials(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		want   map[string]any // of the endpoint: bearerTokenFile, authorization
	}{
		{"defaults", `{serviceMonitor: {enabled: true}}`, map[string]any{"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}},
		{"a Secret", `{serviceMonitor: {enabled: true, authorization: {credentials: {name: tok, key: token}}}}`,
			map[string]any{"authorization": map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "tok", "key": "token"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.values)
			sm := find(objects(t, charts.Options{Values: vals}), "ServiceMonitor", "olmguard")
			if sm == nil {
				t.Fatal("no ServiceMonitor")
			}
			eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
			got := map[string]any{}
			for _, k := range []string{"bearerTokenFile", "authorization"} {
				if v, ok := eps[0].(map[string]any)[k]; ok {
					got[k] = v
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("credentials (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStandardLabels: every object the chart renders, and every pod template, carries Helm's
// standard labels for the release, with the defaults and with every example.
func TestStandardLabels(t *testing.T) {
	ch := load(t)
	want := map[string]string{
		"helm.sh/chart":                "olmguard-" + ch.Metadata.Version,
		"app.kubernetes.io/instance":   "guard",
		"app.kubernetes.io/version":    ch.Metadata.AppVersion,
		"app.kubernetes.io/managed-by": "Helm",
		"app.kubernetes.io/name":       "olmguard",
	}
	for _, ex := range withDefaults(t) {
		t.Run(ex.name, func(t *testing.T) {
			objs, err := charts.Objects(ch, charts.Options{ReleaseName: "guard", Values: ex.values})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range objs {
				for _, labels := range labelSets(o) {
					for k, v := range want {
						if labels[k] != v {
							t.Errorf("%s %s: label %s=%q, want %q", o.GetKind(), o.GetName(), k, labels[k], v)
						}
					}
				}
			}
		})
	}
}

// TestKustomizeLeavesOutHelmLabels: the kustomize tree is not a Helm release: no object of any
// overlay (with every component) carries helm.sh/chart, app.kubernetes.io/managed-by or
// app.kubernetes.io/version (which an overlay's image may make wrong), while olmguard's own labels
// and app.kubernetes.io/instance stay.
func TestKustomizeLeavesOutHelmLabels(t *testing.T) {
	if !slices.Equal(charts.KustomizeDropsLabels, []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}) {
		t.Errorf("KustomizeDropsLabels %v", charts.KustomizeDropsLabels)
	}
	for _, overlay := range manifests.Overlays {
		objs, err := manifests.Objects(overlay, "", "servicemonitor", "prometheusrule")
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			for _, labels := range labelSets(o) {
				for _, l := range charts.KustomizeDropsLabels {
					if _, ok := labels[l]; ok {
						t.Errorf("%s: %s %s has label %s", overlay, o.GetKind(), o.GetName(), l)
					}
				}
				if labels["app.kubernetes.io/name"] != "olmguard" || labels["app.kubernetes.io/instance"] != charts.DefaultReleaseName {
					t.Errorf("%s: %s %s labels %v", overlay, o.GetKind(), o.GetName(), labels)
				}
			}
		}
	}
}

// TestFullnameOverride: "" and olmguard render olmguard's fixed names; nothing else renders.
func TestFullnameOverride(t *testing.T) {
	for _, name := range []string{"", "olmguard"} {
		objs := objects(t, charts.Options{Values: map[string]any{"fullnameOverride": name}})
		for _, want := range []string{"olmguard-webhook", "olmguard-controller"} {
			typed[appsv1.Deployment](t, objs, "Deployment", want)
		}
	}
	if _, err := charts.Templates(load(t), charts.Options{Values: map[string]any{"fullnameOverride": "x"}}); err == nil || !strings.Contains(err.Error(), "Names that stay fixed") {
		t.Errorf("fullnameOverride x: %v", err)
	}
}

// TestValuesAreDocumented: every value of values.yaml (each leaf, or a map a row documents whole)
// is named in a row of the README's tables: as itself, through an ancestor, as *.x for both
// components, or in a group such as a.{b, c}.
func TestValuesAreDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	group := regexp.MustCompile(`^([\w*.]+)\.\{([\w, ]+)\}$`)
	named := map[string]bool{}
	for _, line := range strings.Split(string(readme), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, m := range code.FindAllStringSubmatch(line, -1) {
			toks := []string{m[1]}
			if g := group.FindStringSubmatch(m[1]); g != nil {
				toks = nil
				for _, x := range strings.Split(g[2], ",") {
					toks = append(toks, g[1]+"."+strings.TrimSpace(x))
				}
			}
			for _, tok := range toks {
				if rest, ok := strings.CutPrefix(tok, "*."); ok {
					named["webhook."+rest], named["controller."+rest] = true, true
				} else {
					named[tok] = true
				}
			}
		}
	}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			p := prefix + k
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
				walk(p+".", sub)
				continue
			}
			segs := strings.Split(p, ".")
			documented := false
			for i := 1; i <= len(segs); i++ {
				documented = documented || named[strings.Join(segs[:i], ".")]
			}
			if !documented {
				t.Errorf("values.yaml's %s is not named in a row of README.md's tables", p)
			}
		}
	}
	walk("", load(t).Values)
}

// TestWebhookConfigurationAnnotations: webhook.configurationAnnotations sit beside cert-manager's
// injection annotation in the certManager mode, on both configurations.
func TestWebhookConfigurationAnnotations(t *testing.T) {
	objs := objects(t, charts.Options{Values: map[string]any{
		"certificate": map[string]any{"mode": "certManager"},
		"webhook":     map[string]any{"configurationAnnotations": map[string]any{"admissions.enforcer/disabled": "true"}},
	}})
	want := map[string]string{"admissions.enforcer/disabled": "true", "cert-manager.io/inject-ca-from": charts.DefaultNamespace + "/olmguard-webhook"}
	n := 0
	for _, o := range objs {
		if strings.HasSuffix(o.GetKind(), "WebhookConfiguration") {
			n++
			if diff := cmp.Diff(want, o.GetAnnotations()); diff != "" {
				t.Errorf("%s annotations (-want +got):\n%s", o.GetKind(), diff)
			}
		}
	}
	if n != 2 {
		t.Errorf("%d webhook configurations", n)
	}
}

// labelSets are an object's labels and, for a workload, its pod template's.
func labelSets(o *unstructured.Unstructured) []map[string]string {
	sets := []map[string]string{o.GetLabels()}
	if l, ok, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels"); ok {
		sets = append(sets, l)
	}
	return sets
}

// yamlValues parses a chart's values written in YAML.
func yamlValues(t *testing.T, values string) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
		t.Fatal(err)
	}
	return vals
}
