package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/testenv"
)

// uninstallFixture is a cluster with olmguard's objects in it, a tenant's look-alikes labelled
// as olmguard's, and CSVs with and without its finalizer in two namespaces.
type uninstallFixture struct {
	c                              client.Client
	kubeconfig                     string
	system, tenant, ns1, ns2, hook string
	objects                        []client.Object
}

func newUninstallFixture(t *testing.T) *uninstallFixture {
	t.Helper()
	e := testenv.Shared(t)
	f := &uninstallFixture{c: e.Client, kubeconfig: testenv.WriteKubeconfig(t, e.Config)}
	f.system = testenv.FreshNamespace(t, f.c, "og-system")
	f.tenant = testenv.FreshNamespace(t, f.c, "og-tenant")
	f.ns1 = testenv.FreshNamespace(t, f.c, "og-ops1")
	f.ns2 = testenv.FreshNamespace(t, f.c, "og-ops2")
	f.hook = "olmguard-" + f.system
	ours := map[string]string{olmguard.NameLabel: olmguard.Name}
	deployment := func(ns, name string, replicas int32, labels map[string]string) *appsv1.Deployment {
		sel := map[string]string{"app": name}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
			Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}}}}
	}
	csv := func(ns, name string, finalizers ...string) *v1alpha1.ClusterServiceVersion {
		return &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Finalizers: finalizers},
			Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}}}
	}
	service := admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: f.system, Name: "olmguard-webhook"}}
	none := admissionregistrationv1.SideEffectClassNone
	f.objects = []client.Object{
		deployment(f.system, "olmguard-webhook", 2, ours),
		deployment(f.system, "other", 1, nil),
		deployment(f.tenant, "lookalike", 1, ours),
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.tenant, Name: "lookalike", Labels: ours},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}}},
		// They call the webhook's Service in olmguard's namespace (and intercept nothing).
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: f.hook, Labels: ours},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "m.olmguard.io", ClientConfig: service,
				SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: f.hook, Labels: ours},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "v.olmguard.io", ClientConfig: service,
				SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}}},
		csv(f.ns1, "a.v1", olmguard.CleanupFinalizer, "example.com/other"),
		csv(f.ns2, "b.v1", olmguard.CleanupFinalizer),
		csv(f.ns1, "c.v1", "example.com/other"),
	}
	for _, o := range f.objects {
		if err := f.c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range f.objects[4:6] {
			_ = f.c.Delete(context.Background(), o)
		}
	})
	return f
}

// versions returns each object's resourceVersion ("gone" when it no longer exists).
func (f *uninstallFixture) versions(t *testing.T) []string {
	t.Helper()
	var rvs []string
	for _, o := range f.objects {
		cur := o.DeepCopyObject().(client.Object)
		if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(o), cur); err != nil {
			rvs = append(rvs, "gone")
			continue
		}
		rvs = append(rvs, cur.GetResourceVersion())
	}
	return rvs
}

func (f *uninstallFixture) run(t *testing.T, terminal bool, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runWith(append([]string{"--kubeconfig", f.kubeconfig, "uninstall"}, args...),
		streams{in: strings.NewReader(stdin), out: &stdout, err: &stderr, terminal: func() bool { return terminal }})
	return code, stdout.String(), stderr.String()
}

// The changes the fixture's uninstall makes, olmguard's namespace found from its webhook
// configurations: olmguard's Deployment (not the tenant's look-alikes), its webhook
// configurations, and the CSVs of both namespaces (with ns1 those of ns1 only).
func (f *uninstallFixture) changes(ns1 bool) []string {
	want := []string{fmt.Sprintf("deployment.apps/olmguard-webhook -n %s: scale from 2 to 0 replicas", f.system),
		"mutatingwebhookconfiguration.admissionregistration.k8s.io/" + f.hook + ": delete",
		"validatingwebhookconfiguration.admissionregistration.k8s.io/" + f.hook + ": delete",
		fmt.Sprintf("clusterserviceversion.operators.coreos.com/a.v1 -n %s: remove finalizer olmguard.io/cleanup", f.ns1)}
	if !ns1 {
		want = append(want, fmt.Sprintf("clusterserviceversion.operators.coreos.com/b.v1 -n %s: remove finalizer olmguard.io/cleanup", f.ns2))
	}
	return want
}

// listed returns the change lines of a plan printed by uninstall (indented) that concern the
// fixture.
func (f *uninstallFixture) listed(out string) []string {
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		line = strings.TrimSpace(line)
		for _, mark := range []string{f.system, f.tenant, f.ns1, f.ns2, f.hook} {
			if strings.Contains(line, mark) {
				got = append(got, line)
				break
			}
		}
	}
	return got
}

// --dry-run lists every change, in order, and changes nothing (every resourceVersion the same);
// without --yes and without a terminal uninstall refuses, and on a terminal it does nothing unless
// confirmed; confirmed, it makes exactly the changes listed, within its scope: -n releases only
// that namespace's CSVs, --olmguard-namespace leaves a tenant's look-alikes alone. Fails on the
// flag package's plugin, which had no --dry-run, --yes nor scope and changed the cluster at once.
func TestUninstall(t *testing.T) {
	f := newUninstallFixture(t)
	before := f.versions(t)
	unchanged := func(t *testing.T) {
		t.Helper()
		if after := f.versions(t); !slices.Equal(before, after) {
			t.Errorf("resourceVersions changed: %v, then %v", before, after)
		}
	}

	t.Run("dry run lists every change and makes none", func(t *testing.T) {
		code, out, errOut := f.run(t, false, "", "--dry-run")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if got, want := f.listed(out), f.changes(false); !slices.Equal(got, want) {
			t.Errorf("listed\n  %s\nwant\n  %s\noutput:\n%s", strings.Join(got, "\n  "), strings.Join(want, "\n  "), out)
		}
		if !strings.HasPrefix(out, "Dry run: nothing is changed.\nolmguard's Deployments and pods are looked for in namespace "+f.system+".\n") {
			t.Errorf("output does not say it is a dry run, in olmguard's namespace (its webhook configurations' Service's):\n%s", out)
		}
		unchanged(t)
	})
	t.Run("no terminal and no --yes: refused", func(t *testing.T) {
		code, out, errOut := f.run(t, false, "yes\n")
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "refusing to change the cluster without --yes") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
		unchanged(t)
	})
	t.Run("on a terminal, not confirmed", func(t *testing.T) {
		code, out, errOut := f.run(t, true, "n\n")
		if code != 1 || !strings.Contains(errOut, "Type yes to confirm") || !strings.Contains(errOut, "not confirmed: nothing changed") {
			t.Errorf("exit %d, stderr %q", code, errOut)
		}
		if got, want := f.listed(out), f.changes(false)[:1]; len(got) == 0 || !slices.Equal(got[:1], want) {
			t.Errorf("the question does not list the changes first:\n%s", out)
		}
		unchanged(t)
	})
	t.Run("on a terminal, confirmed, scoped", func(t *testing.T) {
		code, out, errOut := f.run(t, true, "yes\n", "-n", f.ns1)
		if code != 0 {
			t.Fatalf("exit %d: %s\n%s", code, errOut, out)
		}
		plan, _, ok := strings.Cut(out, "Nothing else is deleted")
		if !ok {
			t.Fatalf("no plan printed:\n%s", out)
		}
		if got, want := f.listed(plan), f.changes(true); !slices.Equal(got, want) {
			t.Errorf("listed\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		after := f.versions(t)
		for i, o := range f.objects {
			changed := after[i] != before[i]
			name := fmt.Sprintf("%T %s/%s", o, o.GetNamespace(), o.GetName())
			switch i {
			case 0, 4, 5, 6: // olmguard's Deployment, its webhook configurations, ns1's CSV with the finalizer
				if !changed {
					t.Errorf("%s not changed", name)
				}
			default:
				if changed {
					t.Errorf("%s changed (%s, then %s): out of the uninstall's scope", name, before[i], after[i])
				}
			}
		}
		var dep appsv1.Deployment
		if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(f.objects[0]), &dep); err != nil || *dep.Spec.Replicas != 0 {
			t.Errorf("olmguard's Deployment: %v, replicas %v", err, dep.Spec.Replicas)
		}
		var csv v1alpha1.ClusterServiceVersion
		if err := f.c.Get(context.Background(), client.ObjectKeyFromObject(f.objects[6]), &csv); err != nil || !slices.Equal(csv.Finalizers, []string{"example.com/other"}) {
			t.Errorf("ns1's CSV: %v, finalizers %v", err, csv.Finalizers)
		}
		for _, i := range []int{4, 5} {
			if after[i] != "gone" {
				t.Errorf("webhook configuration %T still there", f.objects[i])
			}
		}
	})
	t.Run("no webhook configuration left: every namespace, or --olmguard-namespace", func(t *testing.T) {
		code, out, errOut := f.run(t, false, "", "--dry-run")
		want := []string{
			fmt.Sprintf("deployment.apps/olmguard-webhook -n %s: scale from 0 to 0 replicas", f.system),
			fmt.Sprintf("deployment.apps/lookalike -n %s: scale from 1 to 0 replicas", f.tenant),
			fmt.Sprintf("pod/lookalike -n %s: wait until it is gone (up to 2m0s)", f.tenant),
			fmt.Sprintf("clusterserviceversion.operators.coreos.com/b.v1 -n %s: remove finalizer olmguard.io/cleanup", f.ns2),
		}
		if got := f.listed(out); code != 0 || !slices.Equal(got, want) || !strings.Contains(out, "looked for in every namespace") {
			t.Errorf("exit %d (%s), listed\n  %s\nwant\n  %s\n%s", code, errOut, strings.Join(got, "\n  "), strings.Join(want, "\n  "), out)
		}
		code, out, errOut = f.run(t, false, "", "--dry-run", "--olmguard-namespace", f.system)
		if got := f.listed(out); code != 0 || !slices.Equal(got, []string{want[0], want[3]}) {
			t.Errorf("--olmguard-namespace: exit %d (%s), listed %q", code, errOut, got)
		}
	})
}
