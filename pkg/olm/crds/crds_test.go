package crds_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/pkg/olm/crds"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestLoad(t *testing.T) {
	defs, err := crds.Load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"subscriptions.operators.coreos.com": true, "installplans.operators.coreos.com": true,
		"clusterserviceversions.operators.coreos.com": true, "catalogsources.operators.coreos.com": true, "operatorgroups.operators.coreos.com": true}
	for _, d := range defs {
		delete(want, d.Name)
		for _, v := range d.Spec.Versions {
			props := v.Schema.OpenAPIV3Schema.Properties
			for _, part := range []string{"spec", "status"} {
				if p, ok := props[part]; ok && (p.XPreserveUnknownFields == nil || !*p.XPreserveUnknownFields) {
					t.Errorf("%s %s.%s must preserve unknown fields: OLM objects carry far more than olmguard reads", d.Name, v.Name, part)
				}
			}
			if v.Subresources == nil || v.Subresources.Status == nil {
				t.Errorf("%s %s: status subresource missing", d.Name, v.Name)
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("missing CRDs: %v", want)
	}
}

// sharedCRDDir returns OLM's published CRDs beside the checkout (../shared/olm-crds) or from
// OLMGUARD_OLM_CRDS, "" when neither exists.
func sharedCRDDir() string {
	if d := os.Getenv(testenv.EnvOLMCRDs); d != "" {
		return d
	}
	root, err := testbin.RepoRoot()
	if err != nil {
		return ""
	}
	d := filepath.Join(root, "..", "shared", "olm-crds")
	if _, err := os.Stat(d); err != nil {
		return ""
	}
	return d
}

// Real OLM objects are accepted by the CRDs, round-trip unchanged (unknown fields kept), and decode
// into olmguard's typed views.
func TestCRDsAcceptRealOLMObjects(t *testing.T) {
	dir := testbin.Require(t, "kube-apiserver", "etcd")
	sets := map[string]func() ([]*apiextensionsv1.CustomResourceDefinition, error){"olmguard": crds.Load}
	if d := sharedCRDDir(); d != "" {
		sets["olm"] = func() ([]*apiextensionsv1.CustomResourceDefinition, error) { return crds.LoadDir(d) }
	} else {
		t.Log("../shared/olm-crds not found: testing olmguard's own CRDs only")
	}
	for name, load := range sets {
		t.Run(name, func(t *testing.T) {
			defs, err := load()
			if err != nil {
				t.Fatal(err)
			}
			env, err := testenv.StartWith(dir, defs)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = env.Stop() }()
			roundTripFixtures(t, env)
		})
	}
}

func roundTripFixtures(t *testing.T, env *testenv.Env) {
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	for _, ns := range []string{"operators", "olm", "team-a", "team-b"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	files, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want := readFixture(t, f)
			obj := want.DeepCopy()
			status, hasStatus := obj.Object["status"]
			delete(obj.Object, "status")
			if err := env.Client.Create(ctx, obj); err != nil {
				t.Fatalf("create rejected: %v", err)
			}
			if hasStatus {
				obj.Object["status"] = status
				if err := env.Client.Status().Update(ctx, obj); err != nil {
					t.Fatalf("status update rejected: %v", err)
				}
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(want.GroupVersionKind())
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
				t.Fatal(err)
			}
			for _, part := range []string{"spec", "status"} {
				if w, ok := want.Object[part]; ok && !contains(got.Object[part], w) {
					t.Errorf("%s was not preserved:\n got  %v\n want %v", part, got.Object[part], w)
				}
			}
			checkTypedView(t, env.Scheme, got)
		})
	}
}

func readFixture(t *testing.T, path string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return u
}

// contains reports whether every field of want is in got with the same value (the server may add
// defaults).
func contains(got, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range w {
			if !contains(g[k], v) {
				return false
			}
		}
		return true
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !contains(g[i], w[i]) {
				return false
			}
		}
		return true
	default:
		// YAML fixtures decode numbers as float64, the server's JSON as int64: compare values.
		return reflect.DeepEqual(got, want) || (got != nil && fmt.Sprint(got) == fmt.Sprint(want))
	}
}

// checkTypedView decodes the stored object into olmguard's typed view and checks the fields olmguard reads.
func checkTypedView(t *testing.T, scheme *runtime.Scheme, u *unstructured.Unstructured) {
	t.Helper()
	typed, err := scheme.New(u.GroupVersionKind())
	if err != nil {
		t.Fatal(err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
		t.Fatalf("decoding into %T: %v", typed, err)
	}
	switch o := typed.(type) {
	case *v1alpha1.Subscription:
		if o.Spec.Package != "etcd" || o.Status.InstallPlanRef == nil || o.Status.InstallPlanRef.Name != "install-abcde" ||
			o.Status.State != v1alpha1.SubscriptionStateAtLatest || o.Status.GetCondition(v1alpha1.SubscriptionCatalogSourcesUnhealthy) == nil {
			t.Errorf("Subscription view: %+v", o)
		}
	case *v1alpha1.InstallPlan:
		if !o.Status.Populated() || o.Status.Phase != v1alpha1.InstallPlanPhaseComplete || len(o.OwnerReferences) != 1 || o.Spec.Generation != 1 {
			t.Errorf("InstallPlan view: %+v", o)
		}
	case *v1alpha1.ClusterServiceVersion:
		if !o.Spec.Cleanup.Enabled || o.Spec.Replaces != "etcdoperator.v0.9.2" || len(o.Spec.CustomResourceDefinitions.Owned) != 1 ||
			o.Spec.WebhookDefinitions[0].DeploymentName != "etcd-operator" || o.Status.Phase != v1alpha1.CSVPhaseSucceeded || o.IsCopied() {
			t.Errorf("CSV view: %+v", o)
		}
	case *v1alpha1.CatalogSource:
		if o.Spec.Image == "" || o.Status.ConnectionState == nil || o.Status.ConnectionState.LastObservedState != "READY" {
			t.Errorf("CatalogSource view: %+v", o)
		}
	case *olmv1.OperatorGroup:
		if len(o.Status.Namespaces) != 2 || o.Status.AllNamespaces() || len(o.Spec.TargetNamespaces) != 2 {
			t.Errorf("OperatorGroup view: %+v", o)
		}
	default:
		t.Errorf("unexpected kind %T", o)
	}
}
