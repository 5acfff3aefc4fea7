package manifests

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

func render(t *testing.T, overlay, image string, components ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := Objects(overlay, image, components...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func typed[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			out := new(T)
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, out); err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

func TestOverlays(t *testing.T) {
	for _, overlay := range Overlays {
		t.Run(overlay, func(t *testing.T) {
			objs := render(t, overlay, "")
			for _, o := range objs {
				if o.GetLabels()["app.kubernetes.io/name"] != "olmguard" {
					t.Errorf("%s %s lacks app.kubernetes.io/name=olmguard (kubectl olmguard uninstall finds Deployments by it)", o.GetKind(), o.GetName())
				}
				if ns := o.GetNamespace(); ns != "" && ns != "olmguard-system" && (ns != "kube-system" || o.GetKind() == "Deployment") {
					t.Errorf("%s %s in namespace %s", o.GetKind(), o.GetName(), ns)
				}
				var rules []rbacv1.PolicyRule
				switch o.GetKind() {
				case "ClusterRole":
					rules = typed[rbacv1.ClusterRole](t, objs, "ClusterRole", o.GetName()).Rules
				case "Role":
					rules = typed[rbacv1.Role](t, []*unstructured.Unstructured{o}, "Role", o.GetName()).Rules
				}
				for _, r := range rules {
					for _, v := range slices.Concat(r.APIGroups, r.Resources, r.Verbs) {
						if strings.Contains(v, "*") {
							t.Errorf("%s %s has a wildcard rule: %+v", o.GetKind(), o.GetName(), r)
						}
					}
				}
			}
			wh := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook")
			if *wh.Spec.Replicas != 2 || wh.Spec.Template.Spec.Affinity == nil || wh.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
				t.Errorf("webhook: want 2 replicas with anti-affinity")
			}
			c := wh.Spec.Template.Spec.Containers[0]
			if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
				t.Errorf("webhook: want readiness on /readyz and a pre-stop delay")
			}
			if c.Image != DefaultImage || !*c.SecurityContext.ReadOnlyRootFilesystem || *c.SecurityContext.AllowPrivilegeEscalation {
				t.Errorf("webhook container: image %s, security %+v", c.Image, c.SecurityContext)
			}
			want := map[string]string{"self-signed": "--self-signed", "cert-manager": "--cert-dir=/etc/olmguard/tls"}[overlay]
			if !slices.Contains(c.Args, want) {
				t.Errorf("webhook args %v lack %s", c.Args, want)
			}
			ctrl := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-controller")
			if !slices.Contains(ctrl.Spec.Template.Spec.Containers[0].Args, "--leader-elect") {
				t.Errorf("controller without leader election: %v", ctrl.Spec.Template.Spec.Containers[0].Args)
			}
			// A warm standby on another node (issue 18): the leader's node loss costs one takeover.
			if *ctrl.Spec.Replicas != 2 || ctrl.Spec.Template.Spec.Affinity == nil || ctrl.Spec.Template.Spec.Affinity.PodAntiAffinity == nil {
				t.Errorf("controller: want 2 replicas with anti-affinity")
			}
			for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
				if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool {
					return o.GetKind() == "PodDisruptionBudget" && o.GetName() == name
				}) {
					t.Errorf("no PodDisruptionBudget %s", name)
				}
			}
			for _, kind := range []string{"PodDisruptionBudget", "NetworkPolicy", "Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
				if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == kind }) {
					t.Errorf("no %s", kind)
				}
			}
		})
	}
}

func TestRenderImageAndComponents(t *testing.T) {
	for image, want := range map[string]string{
		"registry.local:5000/olmguard:dev":    "registry.local:5000/olmguard:dev",
		"registry.local/olmguard@sha256:0123": "registry.local/olmguard@sha256:0123",
	} {
		objs := render(t, "self-signed", image, "servicemonitor")
		for _, name := range []string{"olmguard-webhook", "olmguard-controller"} {
			if got := typed[appsv1.Deployment](t, objs, "Deployment", name).Spec.Template.Spec.Containers[0].Image; got != want {
				t.Errorf("%s image %s, want %s", name, got, want)
			}
		}
		if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceMonitor" }) {
			t.Error("servicemonitor component not added")
		}
	}
	if _, err := Render("nope", ""); err == nil || !strings.Contains(err.Error(), `unknown overlay "nope"`) {
		t.Errorf("unknown overlay: %v", err)
	}
	if _, err := Render("self-signed", "", "nope"); err == nil || !strings.Contains(err.Error(), `unknown component "nope"`) {
		t.Errorf("unknown component: %v", err)
	}
}
