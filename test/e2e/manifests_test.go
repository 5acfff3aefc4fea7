package e2e

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/certmanager"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/install"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// serverSideApply applies obj with server-side apply and strict field validation (install.ServerSideApply).
func serverSideApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured, dryRun bool) error {
	return install.ServerSideApply(ctx, c, obj, dryRun)
}

// plainApply applies obj with server-side apply as `kubectl apply --server-side` does: field
// manager "kubectl", no forced ownership, so a field another manager owns is a conflict.
func plainApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	obj = obj.DeepCopy()
	obj.SetManagedFields(nil)
	//nolint:staticcheck // server-side apply as kubectl does it; Client.Apply takes no field validation
	return c.Patch(ctx, obj, client.Apply, client.FieldOwner("kubectl"), client.FieldValidation("Strict"))
}

// checkPlainReapply applies the RBAC of an install twice more as a user re-syncs it (a plain
// server-side apply), after the aggregation controller filled the aggregated ClusterRole: both
// applies must succeed and no ClusterRole of olmguard may lose its rules at any moment. A
// manifest that declares the aggregated role's rules (even empty) conflicts with the
// clusterrole-aggregation-controller, which owns them, and forcing it empties the role until the
// controller fills it again.
func checkPlainReapply(t *testing.T, ctx context.Context, c *cluster.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	testenv.Eventually(t, "the aggregated controller ClusterRole filled in", func(ctx context.Context) (bool, error) {
		cr := &rbacv1.ClusterRole{}
		err := c.Client.Get(ctx, types.NamespacedName{Name: "olmguard-controller"}, cr)
		return len(cr.Rules) > 0, err
	})
	watch, err := c.WatchEmptiedRoles(ctx, map[string]string{"app.kubernetes.io/name": "olmguard"})
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		for _, o := range objs {
			if !isRBAC(o) {
				continue
			}
			if err := plainApply(ctx, c.Client, o); err != nil {
				t.Errorf("re-apply %d of %s %s without forced ownership: %v", round, o.GetKind(), o.GetName(), err)
			}
		}
	}
	names, err := watch.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(names) > 0 {
		t.Errorf("a plain re-apply left ClusterRoles without rules for a moment: %v", names)
	}
}

// isRBAC reports whether an object is part of olmguard's identities and permissions (install.IsRBAC).
func isRBAC(o *unstructured.Unstructured) bool { return install.IsRBAC(o) }

// TestManifests applies the kustomize output of both overlays with server-side validation, runs
// both binaries with exactly the manifests' RBAC through impersonation of their ServiceAccounts,
// and checks that the webhook configurations select what DESIGN.md says.
func TestManifests(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	certmanager.InstallCRDs(t, c.Client)

	rendered := map[string][]*unstructured.Unstructured{}
	for _, overlay := range manifests.Overlays {
		objs, err := manifests.Objects(overlay, "")
		if err != nil {
			t.Fatal(err)
		}
		rendered[overlay] = objs
	}
	applyManifestRBAC(t, ctx, c, rendered["self-signed"])
	t.Run("re-applied without forced ownership", func(t *testing.T) {
		checkPlainReapply(t, ctx, c, rendered["self-signed"])
	})
	for _, overlay := range manifests.Overlays {
		t.Run("server-side validation/"+overlay, func(t *testing.T) {
			kinds := map[string]int{}
			for _, o := range rendered[overlay] {
				if err := serverSideApply(ctx, c.Client, o, true); err != nil {
					t.Errorf("%s %s/%s rejected: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
				}
				kinds[o.GetKind()]++
			}
			t.Logf("%d objects validated: %v", len(rendered[overlay]), kinds)
		})
	}
	t.Run("servicemonitor component renders", func(t *testing.T) {
		objs, err := manifests.Objects("self-signed", "", "servicemonitor")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return o.GetKind() == "ServiceMonitor" }) {
			t.Error("no ServiceMonitor in the overlay with the component")
		}
	})

	t.Run("webhook configurations select what DESIGN.md says", func(t *testing.T) {
		for _, overlay := range manifests.Overlays {
			checkWebhookConfigurations(t, overlay, rendered[overlay])
		}
	})

	t.Run("RBAC is enough for both binaries", func(t *testing.T) {
		c.SkipUnlessKwok(t) // the binaries run out of cluster: the apiserver must reach 127.0.0.1
		checkRBACIsEnough(t, ctx, c)
	})
}

func checkWebhookConfigurations(t *testing.T, overlay string, objs []*unstructured.Unstructured) {
	t.Helper()
	wantM, wantV := registration.Build(registration.DefaultOptions(), admit.Webhooks(setup.DefaultWebhook().Admission()))
	var gotM admissionregistrationv1.MutatingWebhookConfiguration
	var gotV admissionregistrationv1.ValidatingWebhookConfiguration
	for _, o := range objs {
		var into any
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			into = &gotM
		case "ValidatingWebhookConfiguration":
			into = &gotV
		default:
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
			t.Fatal(err)
		}
	}
	// The overlays add labels (part-of) and, for cert-manager, the CA injection annotation.
	if overlay == "cert-manager" {
		for _, a := range []map[string]string{gotM.Annotations, gotV.Annotations} {
			if a["cert-manager.io/inject-ca-from"] != "olmguard-system/olmguard-webhook" {
				t.Errorf("%s: webhook configuration annotations %v lack the CA injection", overlay, a)
			}
		}
	}
	if diff := cmp.Diff(wantM.Webhooks, gotM.Webhooks); diff != "" {
		t.Errorf("%s: mutating webhooks differ from registration.Build (-want +got):\n%s", overlay, diff)
	}
	if diff := cmp.Diff(wantV.Webhooks, gotV.Webhooks); diff != "" {
		t.Errorf("%s: validating webhooks differ from registration.Build (-want +got):\n%s", overlay, diff)
	}
	// DESIGN.md's rules, spelled out: what is sent, and that nothing else is.
	type sel struct{ name, resources, ops string }
	want := []sel{
		{"installplans.mutate.olmguard.io", "operators.coreos.com/installplans", "CREATE,UPDATE"},
		{"clusterserviceversions.mutate.olmguard.io", "operators.coreos.com/clusterserviceversions", "CREATE,UPDATE"},
		{"jobs.mutate.olmguard.io", "batch/jobs", "CREATE"},
		{"serviceaccounts.mutate.olmguard.io", "/serviceaccounts", "UPDATE"},
		// The reachability probe (issue 35): dry runs of marked ConfigMaps in olmguard's namespace only.
		{"webhook-probe.mutate.olmguard.io", "/configmaps", "CREATE"},
		{"subscriptions.validate.olmguard.io", "operators.coreos.com/subscriptions", "CREATE,UPDATE"},
		// Catalog trust (issue 20, newer than DESIGN.md): CatalogSources as they are written.
		{"catalogsources.validate.olmguard.io", "operators.coreos.com/catalogsources", "CREATE,UPDATE"},
		{"operatorgroups.validate.olmguard.io", "operators.coreos.com/operatorgroups", "CREATE,UPDATE"},
		{"installplans.validate.olmguard.io", "operators.coreos.com/installplans", "UPDATE"},
		{"clusterserviceversions.validate.olmguard.io", "operators.coreos.com/clusterserviceversions", "UPDATE"},
		// The replaces-cycle guard (issue 34, OCPBUGS-23954): only writes of spec.replaces, by matchCondition.
		{"clusterserviceversions-replaces.validate.olmguard.io", "operators.coreos.com/clusterserviceversions", "CREATE,UPDATE"},
	}
	var got []sel
	check := func(name string, rules []admissionregistrationv1.RuleWithOperations, fp *admissionregistrationv1.FailurePolicyType,
		se *admissionregistrationv1.SideEffectClass, timeout *int32, ns *metav1.LabelSelector) {
		var res, ops []string
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, rs := range r.Resources {
					res = append(res, g+"/"+rs)
				}
			}
			for _, op := range r.Operations {
				ops = append(ops, string(op))
			}
		}
		got = append(got, sel{name, strings.Join(res, ","), strings.Join(ops, ",")})
		if fp == nil || *fp != admissionregistrationv1.Ignore {
			t.Errorf("%s: failurePolicy %v, want Ignore", name, fp)
		}
		if se == nil || *se != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %v, want None", name, se)
		}
		if timeout == nil || *timeout > 5 {
			t.Errorf("%s: timeoutSeconds %v, want a few seconds", name, timeout)
		}
		excluded, only := "", ""
		if ns != nil && len(ns.MatchExpressions) == 1 && ns.MatchExpressions[0].Key == "kubernetes.io/metadata.name" {
			switch ns.MatchExpressions[0].Operator {
			case "NotIn":
				excluded = strings.Join(ns.MatchExpressions[0].Values, ",")
			case "In":
				only = strings.Join(ns.MatchExpressions[0].Values, ",")
			}
		}
		if name == "webhook-probe.mutate.olmguard.io" {
			if only != olmguard.DefaultNamespace {
				t.Errorf("%s: namespaceSelector %v, want %s only", name, ns, olmguard.DefaultNamespace)
			}
		} else if excluded != "kube-system,"+olmguard.DefaultNamespace {
			t.Errorf("%s: namespaceSelector %v, want kube-system and %s excluded", name, ns, olmguard.DefaultNamespace)
		}
	}
	for _, w := range gotM.Webhooks {
		check(w.Name, w.Rules, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector)
	}
	for _, w := range gotV.Webhooks {
		check(w.Name, w.Rules, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.NamespaceSelector)
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(sel{})); diff != "" {
		t.Errorf("%s: webhooks select (-want +got):\n%s", overlay, diff)
	}
}

// saKubeconfig writes a kubeconfig that acts as olmguard's ServiceAccount through impersonation.
func saKubeconfig(t *testing.T, c *cluster.Cluster, sa string) string {
	t.Helper()
	return install.ServiceAccountKubeconfig(t, c, sa)
}

// applyManifestRBAC applies the RBAC of the rendered objects for real and removes it at test
// cleanup (install.ApplyRBAC).
func applyManifestRBAC(t *testing.T, ctx context.Context, c *cluster.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	install.ApplyRBAC(t, ctx, c, objs)
}

// checkRBACIsEnough runs the webhook and the controller as their ServiceAccounts and replays every
// failure through them; then neither log may show a permission error.
func checkRBACIsEnough(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	webhook, controller := startAsServiceAccounts(t, ctx, c,
		"--leader-elect", "--catalog-pod-grace=5s", "--catalog-pod-deletions-per-minute=600", "--drift-window=2s")
	replayThroughServiceAccounts(t, ctx, c, webhook, controller)
}

// startAsServiceAccounts runs the webhook and the controller (with controllerArgs) as olmguard's
// ServiceAccounts, through impersonation: the manifests' RBAC (applyManifestRBAC) is all they have.
func startAsServiceAccounts(t *testing.T, ctx context.Context, c *cluster.Cluster, controllerArgs ...string) (webhook, controller *procs.Process) {
	t.Helper()
	o := install.StartAsServiceAccounts(t, ctx, c, install.Options{ControllerArgs: controllerArgs})
	return o.Webhook, o.Controller
}

// replayThroughServiceAccounts replays every failure class through the binaries started by
// startAsServiceAccounts.
func replayThroughServiceAccounts(t *testing.T, ctx context.Context, c *cluster.Cluster, webhook, controller *procs.Process) {
	sim := newSim(t, c, "olm-rbac", olmsim.V0_46)
	f1 := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, f1); err != nil {
		t.Fatal(err)
	}
	t.Run("F1 through the webhook", func(t *testing.T) {
		r, err := scenario.Replay3199(ctx, sim, f1, "rbac-f1")
		if err != nil {
			t.Fatal(err)
		}
		if !r.Owned() {
			t.Errorf("plan %s misses an owner: the webhook could not list Subscriptions", r.Plan.Name)
		}
	})
	t.Run("F2 drift nudged", func(t *testing.T) {
		ns := "rbac-f2"
		syncCtx, stop := context.WithCancel(ctx)
		defer stop()
		go sim.RunSubscriptionSyncer(syncCtx, ns)
		r, err := scenario.ReplayStaleSubscription(ctx, sim, f1, ns)
		if err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "Subscription in step", func(ctx context.Context) (bool, error) {
			return scenario.InStep(ctx, c.Client, r.Auto)
		})
	})
	t.Run("F3 cleanup", func(t *testing.T) {
		ns := "rbac-f3"
		// Installed, then upgraded: OLM labels the bundled ClusterRole only when it applies it again.
		cat := scenario.GammaUpgradeCatalog(ns)
		if err := sim.AddCatalog(ctx, cat); err != nil {
			t.Fatal(err)
		}
		sub, err := scenario.InstallGamma(ctx, sim, cat, ns)
		if err != nil {
			t.Fatal(err)
		}
		csvName := cat.Bundles[len(cat.Bundles)-1].CSVName
		testenv.Eventually(t, "CSV has the cleanup finalizer", func(ctx context.Context) (bool, error) {
			csv := &v1alpha1.ClusterServiceVersion{}
			err := c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: csvName}, csv)
			return slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer), err
		})
		if err := scenario.Uninstall(ctx, c.Client, sub); err != nil {
			t.Fatal(err)
		}
		if err := sim.SyncCSVs(ctx, ns); err != nil {
			t.Fatal(err)
		}
		waitCSVGone(t, ctx, c, ns, csvName, testenv.Patience)
		l, err := scenario.CountLeftovers(ctx, c.Client, cat, ns)
		if err != nil {
			t.Fatal(err)
		}
		if l.Total() != 0 {
			t.Errorf("leftovers after uninstall: %+v", l)
		}
	})
	t.Run("F4 unpack Jobs", func(t *testing.T) {
		if err := scenario.Replay3210(ctx, sim.WithVersion(olmsim.V0_28), "rbac-f4-a", "rbac-f4-b"); err != nil {
			t.Errorf("second install stuck: %v", err)
		}
	})
	t.Run("F5 catalog pod recovery", func(t *testing.T) {
		c.SkipUnlessKwok(t)
		cat := startCatalog(t, ctx, c, "rbac-f5")
		o, err := scenario.FailCatalogNode(ctx, c, cat, testenv.Patience)
		if err != nil {
			t.Fatal(err)
		}
		if !o.Recovered {
			t.Error("catalog pod not recovered: the controller could not delete it")
		}
	})
	t.Run("OperatorGroup guard", func(t *testing.T) {
		ns := "rbac-og"
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		wc, w := testenv.WarningClient(t, c.Config, c.Client.Scheme())
		for _, og := range []*olmv1.OperatorGroup{
			{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: ns}, Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{ns, "rbac-og-missing"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: ns}},
		} {
			if err := wc.Create(ctx, og); err != nil {
				t.Fatal(err)
			}
		}
		got := w.Take()
		if !strings.Contains(got, "do not exist: rbac-og-missing") || !strings.Contains(got, "already has OperatorGroup first") || strings.Contains(got, "could not") {
			t.Errorf("warnings %q, want the missing target and the second OperatorGroup: the webhook could not read Namespaces or OperatorGroups", got)
		}
	})
	checkNoPermissionErrors(t, c, webhook, controller)
}

// checkNoPermissionErrors stops the processes started by startAsServiceAccounts and fails on a
// permission error in their logs; it also checks that they ran as the ServiceAccounts.
func checkNoPermissionErrors(t *testing.T, c *cluster.Cluster, ps ...*procs.Process) {
	t.Helper()
	for _, p := range ps {
		p.Stop()
		b, err := os.ReadFile(p.Log)
		if err != nil {
			t.Fatal(err)
		}
		// The controller's first OLM audit (olm-audit) runs at once and lists what doctor reads:
		// it must have finished, with the ServiceAccount's permissions.
		if p.Name == "controller" && !strings.Contains(string(b), "OLM audit done") {
			t.Errorf("the controller's log shows no finished OLM audit (OLM audit done)")
		}
		for _, line := range strings.Split(string(b), "\n") {
			// An Event refused in a namespace being deleted (another test's) is no permission error.
			if procs.PermissionDenied.MatchString(line) && !strings.Contains(line, "because it is being terminated") {
				t.Errorf("%s lacks a permission: %s", p.Name, line)
			}
		}
	}
	// The manifests' RBAC was all the binaries had: they ran as the ServiceAccounts.
	for _, sa := range []string{"olmguard-webhook", "olmguard-controller"} {
		user, err := procs.WhoAmI(saKubeconfig(t, c, sa))
		if want := "system:serviceaccount:" + olmguard.DefaultNamespace + ":" + sa; err != nil || user != want {
			t.Errorf("impersonation: %s acts as %q (%v), want %q", sa, user, err, want)
		}
	}
}
