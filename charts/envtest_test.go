package charts_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/kube"
	release "helm.sh/helm/v4/pkg/release/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/pkg/uninstall"
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
//     uninstall) leaves none of the release's objects.
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
