package charts_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
)

// hookObjects renders the chart's Helm hooks, keyed by template file.
func hookObjects(t *testing.T, o charts.Options) map[string][]*unstructured.Unstructured {
	t.Helper()
	tpls, err := charts.Hooks(load(t), o)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*unstructured.Unstructured{}
	for name, text := range tpls {
		for _, doc := range strings.Split(text, "\n---\n") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(u.Object) > 0 {
				out[name] = append(out[name], u)
			}
		}
	}
	return out
}

func typedFrom[T any](t *testing.T, objs []*unstructured.Unstructured, kind, name string) *T {
	t.Helper()
	return typed[T](t, objs, kind, name)
}

// uninstallRules are the permissions kubectl-olmguard uninstall --yes --olmguard-namespace needs
// (pkg/uninstall): listed here as the calls it makes, and checked against a kube-apiserver in
// TestAgainstAPIServer.
var (
	uninstallClusterRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, Verbs: []string{"list"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}, ResourceNames: []string{"olmguard-mutating", "olmguard-validating"}, Verbs: []string{"delete"}},
		{APIGroups: []string{"operators.coreos.com"}, Resources: []string{"clusterserviceversions"}, Verbs: []string{"list", "patch"}},
	}
	uninstallNamespaceRules = []rbacv1.PolicyRule{
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	}
)

// TestUninstallHook: the pre-delete hook runs the image's kubectl-olmguard uninstall for the
// release namespace, creates its identity and permissions before the Job, deletes everything when
// it ends, runs a restricted pod with the controller's scheduling, and can be turned off.
func TestUninstallHook(t *testing.T) {
	values := map[string]any{
		"image":         map[string]any{"registry": "mirror.example.com/olm"},
		"controller":    map[string]any{"nodeSelector": map[string]any{"pool": "system"}, "tolerations": []any{map[string]any{"key": "dedicated", "operator": "Exists"}}},
		"uninstallHook": map[string]any{"timeoutSeconds": 200, "stopTimeout": "90s", "backoffLimit": 2},
	}
	const ns = "guard"
	hooks := hookObjects(t, charts.Options{Namespace: ns, Values: values})
	if got := slices.Sorted(maps.Keys(hooks)); !slices.Equal(got, []string{"tests/webhook-probe.yaml", "uninstall-hook.yaml"}) {
		t.Fatalf("hook templates %v, want [tests/webhook-probe.yaml uninstall-hook.yaml]", got)
	}
	objs := hooks["uninstall-hook.yaml"]
	weights := map[string]string{"ServiceAccount": "-10", "ClusterRole": "-10", "Role": "-10", "ClusterRoleBinding": "-5", "RoleBinding": "-5", "Job": "0"}
	for _, o := range objs {
		a := o.GetAnnotations()
		if a["helm.sh/hook"] != "pre-delete" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded,hook-failed" {
			t.Errorf("%s %s: hook annotations %v", o.GetKind(), o.GetName(), a)
		}
		if want, ok := weights[o.GetKind()]; !ok || a["helm.sh/hook-weight"] != want {
			t.Errorf("%s %s: weight %q, want %q", o.GetKind(), o.GetName(), a["helm.sh/hook-weight"], want)
		}
		delete(weights, o.GetKind())
		if o.GetName() != "olmguard-uninstall" {
			t.Errorf("%s %s: want the name olmguard-uninstall", o.GetKind(), o.GetName())
		}
	}
	if len(weights) != 0 {
		t.Errorf("kinds missing from the hook: %v", weights)
	}
	if diff := cmp.Diff(uninstallClusterRules, typedFrom[rbacv1.ClusterRole](t, objs, "ClusterRole", "olmguard-uninstall").Rules); diff != "" {
		t.Errorf("ClusterRole rules (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(uninstallNamespaceRules, typedFrom[rbacv1.Role](t, objs, "Role", "olmguard-uninstall").Rules); diff != "" {
		t.Errorf("Role rules (-want +got):\n%s", diff)
	}
	for _, kind := range []string{"ClusterRoleBinding", "RoleBinding"} {
		b := typedFrom[rbacv1.RoleBinding](t, objs, kind, "olmguard-uninstall")
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "olmguard-uninstall", Namespace: ns}}
		if diff := cmp.Diff(want, b.Subjects); diff != "" || b.RoleRef.Name != "olmguard-uninstall" {
			t.Errorf("%s: subjects (-want +got):\n%s roleRef %v", kind, diff, b.RoleRef)
		}
	}

	job := typedFrom[batchv1.Job](t, objs, "Job", "olmguard-uninstall")
	if job.Namespace != ns || job.Spec.BackoffLimit == nil || *job.Spec.BackoffLimit != 2 || job.Spec.ActiveDeadlineSeconds == nil || *job.Spec.ActiveDeadlineSeconds != 200 {
		t.Errorf("Job %s/%s: backoffLimit %v, activeDeadlineSeconds %v", job.Namespace, job.Name, job.Spec.BackoffLimit, job.Spec.ActiveDeadlineSeconds)
	}
	pod := job.Spec.Template
	if _, ok := pod.Labels[olmguard.NameLabel]; ok {
		t.Errorf("the hook's pod carries %s: uninstall would wait for its own pod", olmguard.NameLabel)
	}
	if pod.Spec.ServiceAccountName != "olmguard-uninstall" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("pod: serviceAccountName %q, restartPolicy %q", pod.Spec.ServiceAccountName, pod.Spec.RestartPolicy)
	}
	defaults := objects(t, charts.Options{Namespace: ns, Values: values})
	ctl := typed[appsv1.Deployment](t, defaults, "Deployment", "olmguard-controller").Spec.Template.Spec
	if diff := cmp.Diff(ctl.SecurityContext, pod.Spec.SecurityContext); diff != "" {
		t.Errorf("pod security context differs from the controller's (-controller +hook):\n%s", diff)
	}
	if diff := cmp.Diff(ctl.NodeSelector, pod.Spec.NodeSelector); diff != "" {
		t.Errorf("nodeSelector differs from the controller's:\n%s", diff)
	}
	if diff := cmp.Diff(ctl.Tolerations, pod.Spec.Tolerations); diff != "" {
		t.Errorf("tolerations differ from the controller's:\n%s", diff)
	}
	c := pod.Spec.Containers[0]
	if c.Image != ctl.Containers[0].Image || !strings.HasPrefix(c.Image, "mirror.example.com/olm/") {
		t.Errorf("image %q, want the controller's %q (from the mirror)", c.Image, ctl.Containers[0].Image)
	}
	if diff := cmp.Diff(ctl.Containers[0].SecurityContext, c.SecurityContext); diff != "" {
		t.Errorf("container security context differs from the controller's:\n%s", diff)
	}
	wantCmd := []string{"/kubectl-olmguard", "uninstall", "--yes", "--olmguard-namespace=guard", "--stop-timeout=90s"}
	if got := append(slices.Clone(c.Command), c.Args...); !slices.Equal(got, wantCmd) {
		t.Errorf("command %q, want %q", got, wantCmd)
	}

	off := hookObjects(t, charts.Options{Values: map[string]any{"uninstallHook": map[string]any{"enabled": false}}})
	if _, ok := off["uninstall-hook.yaml"]; ok {
		t.Errorf("uninstallHook.enabled=false still renders the pre-delete hook")
	}
}

// TestUninstallHookExample: examples/controller-tuning.yaml's uninstallHook values reach the Job.
func TestUninstallHookExample(t *testing.T) {
	for _, ex := range examples(t) {
		if ex.name != "controller-tuning.yaml" {
			continue
		}
		job := typedFrom[batchv1.Job](t, hookObjects(t, charts.Options{Values: ex.values})["uninstall-hook.yaml"], "Job", "olmguard-uninstall")
		if *job.Spec.ActiveDeadlineSeconds != 180 || *job.Spec.BackoffLimit != 2 || !slices.Contains(job.Spec.Template.Spec.Containers[0].Command, "--stop-timeout=90s") {
			t.Errorf("Job: activeDeadlineSeconds %d, backoffLimit %d, command %q", *job.Spec.ActiveDeadlineSeconds, *job.Spec.BackoffLimit, job.Spec.Template.Spec.Containers[0].Command)
		}
		return
	}
	t.Fatal("no example controller-tuning.yaml")
}

// TestHooksStayOutOfTheRelease: hooks are not part of Templates (so not of the kustomize tree,
// which a kubectl-applied install uses without Helm's hooks) and no generated file holds one.
func TestHooksStayOutOfTheRelease(t *testing.T) {
	for _, o := range objects(t, charts.Options{}) {
		if _, ok := o.GetAnnotations()["helm.sh/hook"]; ok || strings.Contains(o.GetName(), "uninstall") {
			t.Errorf("%s %s: a hook among the release's objects", o.GetKind(), o.GetName())
		}
	}
	files, err := charts.Generate("..", admit.Webhooks(setup.DefaultWebhook().Admission()))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range files {
		if strings.Contains(string(b), "helm.sh/hook") || strings.Contains(string(b), "olmguard-uninstall") {
			t.Errorf("generated %s holds a Helm hook", name)
		}
	}
}

// TestWebhookProbeTest: helm test runs the image's kubectl-olmguard probe for the release
// namespace in a restricted Pod whose ServiceAccount may only create ConfigMaps there (a dry run
// needs it), created after its RBAC and deleted when it passes.
func TestWebhookProbeTest(t *testing.T) {
	const ns = "guard"
	values := map[string]any{"global": map[string]any{"imageRegistry": "mirror.example.com"}}
	objs := hookObjects(t, charts.Options{Namespace: ns, Values: values})["tests/webhook-probe.yaml"]
	weights := map[string]string{"ServiceAccount": "-10", "Role": "-10", "RoleBinding": "-5", "Pod": "0"}
	for _, o := range objs {
		a := o.GetAnnotations()
		if a["helm.sh/hook"] != "test" || a["helm.sh/hook-delete-policy"] != "before-hook-creation,hook-succeeded" {
			t.Errorf("%s %s: hook annotations %v", o.GetKind(), o.GetName(), a)
		}
		if want, ok := weights[o.GetKind()]; !ok || a["helm.sh/hook-weight"] != want {
			t.Errorf("%s %s: weight %q, want %q", o.GetKind(), o.GetName(), a["helm.sh/hook-weight"], want)
		}
		delete(weights, o.GetKind())
	}
	if len(weights) != 0 {
		t.Errorf("kinds missing from the test: %v", weights)
	}
	role := typedFrom[rbacv1.Role](t, objs, "Role", "olmguard-test")
	want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" || role.Namespace != ns {
		t.Errorf("Role %s: rules (-want +got):\n%s", role.Namespace, diff)
	}
	pod := typedFrom[corev1.Pod](t, objs, "Pod", "olmguard-test-webhook-probe")
	if _, ok := pod.Labels[olmguard.NameLabel]; ok {
		t.Errorf("the test's pod carries %s: uninstall would wait for a failed test's pod", olmguard.NameLabel)
	}
	ctl := typed[appsv1.Deployment](t, objects(t, charts.Options{Namespace: ns, Values: values}), "Deployment", "olmguard-controller").Spec.Template.Spec
	c := pod.Spec.Containers[0]
	if wantCmd := []string{"/kubectl-olmguard", "probe", "--olmguard-namespace=guard"}; !slices.Equal(c.Command, wantCmd) {
		t.Errorf("command %q, want %q", c.Command, wantCmd)
	}
	if c.Image != ctl.Containers[0].Image || !strings.HasPrefix(c.Image, "mirror.example.com/") {
		t.Errorf("image %q, want the controller's %q", c.Image, ctl.Containers[0].Image)
	}
	if diff := cmp.Diff(ctl.SecurityContext, pod.Spec.SecurityContext); diff != "" {
		t.Errorf("pod security context differs from the controller's:\n%s", diff)
	}
	if diff := cmp.Diff(ctl.Containers[0].SecurityContext, c.SecurityContext); diff != "" {
		t.Errorf("container security context differs from the controller's:\n%s", diff)
	}
	if pod.Spec.ServiceAccountName != "olmguard-test" || pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.ActiveDeadlineSeconds == nil {
		t.Errorf("pod: serviceAccountName %q, restartPolicy %q, activeDeadlineSeconds %v", pod.Spec.ServiceAccountName, pod.Spec.RestartPolicy, pod.Spec.ActiveDeadlineSeconds)
	}
}
