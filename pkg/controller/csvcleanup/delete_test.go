package csvcleanup_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m, nil) }

var widgets = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

// TestDeletePath runs the cleanup finalizer's delete path against a real apiserver, with OLM away
// (nothing else touches the objects): a CSV deleted while the controller is down, then, with it
// running, an uninstall, an upgrade, a tenant's CSV claiming a CRD, an uninstall that opted in to
// operand cleanup and two tenants sharing a bundled ClusterRole. The steps run in order because the
// first needs the controller stopped.
func TestDeletePath(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx := context.Background()
	createWidgetCRD(t, c)

	var downCSV *v1alpha1.ClusterServiceVersion
	var downRole client.Object
	t.Run("deleted while the controller is down: held", func(t *testing.T) {
		ns := namespace(t, c, "down")
		downCSV = createCSV(t, c, ns, "op.v1", "", false)
		downRole = createClusterRole(t, c, "down-role", ownerLabels(downCSV))
		if err := c.Delete(ctx, downCSV); err != nil {
			t.Fatal(err)
		}
		// Without the controller the finalizer holds the CSV: nothing is lost while it is down.
		got := &v1alpha1.ClusterServiceVersion{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(downCSV), got); err != nil || got.DeletionTimestamp == nil {
			t.Fatalf("the CSV should wait for olmguard's cleanup: %v, %+v", err, got.ObjectMeta)
		}
	})
	if t.Failed() {
		return
	}
	startController(t, env)

	t.Run("deleted while the controller is down: cleaned up once it runs", func(t *testing.T) {
		waitGone(t, c, downCSV, "the CSV")
		waitGone(t, c, downRole, "its ClusterRole")
	})

	t.Run("uninstall", func(t *testing.T) {
		ns := namespace(t, c, "uninstall")
		csv := createCSV(t, c, ns, "op.v1", "", false)
		binding := createClusterRoleBinding(t, c, "uninstall-binding", ownerLabels(csv))
		bundled := createClusterRole(t, c, "uninstall-bundled", map[string]string{olm.OwnerLabel: "op.v1"}) // OLM #2985
		other := createClusterRole(t, c, "uninstall-other", map[string]string{olm.OwnerLabel: "someone-else",
			olm.OwnerNamespaceLabel: ns, olm.OwnerKindLabel: olm.ClusterServiceVersionKind})
		widget := createWidget(t, c, ns, "kept")
		if err := c.Delete(ctx, csv); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, csv, "the uninstalled CSV")
		waitGone(t, c, binding, "its labelled ClusterRoleBinding")
		waitGone(t, c, bundled, "its bundled ClusterRole")
		mustExist(t, c, other, "another CSV's ClusterRole")
		mustExist(t, c, widget, "an operand of a CSV that did not opt in")
	})

	t.Run("upgrade", func(t *testing.T) {
		ns := namespace(t, c, "upgrade")
		old := createCSV(t, c, ns, "op.v1", "", true)
		next := createCSV(t, c, ns, "op.v2", "op.v1", true)
		oldRole := createClusterRole(t, c, "upgrade-v1", ownerLabels(old))
		nextRole := createClusterRole(t, c, "upgrade-v2", ownerLabels(next))
		widget := createWidget(t, c, ns, "kept")
		if err := c.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, old, "the replaced CSV")
		waitGone(t, c, oldRole, "the replaced CSV's own ClusterRole")
		mustExist(t, c, nextRole, "the new CSV's ClusterRole")
		mustExist(t, c, widget, "an operand during an upgrade, though both CSVs opted in")
		mustExist(t, c, next, "the new CSV")
		// The next step's CSV must be the only one owning the Widget CRD: a CRD another CSV also
		// claims keeps its operands.
		if err := c.Delete(ctx, next); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, next, "the new CSV, uninstalled in turn")
	})

	t.Run("a tenant's CSV claiming a CRD OLM never installed for it deletes no custom resource", func(t *testing.T) {
		// Created by hand (no InstallPlan), claiming the Widget CRD nobody else's CSV owns, with
		// operand cleanup on. Fails before the fix: its deletion deleted every Widget in its
		// target namespaces.
		ns := namespace(t, c, "claimant")
		csv := createCSV(t, c, ns, "claimant.v1", "", true)
		victim := createWidget(t, c, ns, "not-the-claimants")
		if err := c.Delete(ctx, csv); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, csv, "the claimant's CSV")
		mustExist(t, c, victim, "a custom resource of a CRD OLM did not install for the deleted CSV")
	})

	t.Run("uninstall that opted in to operand cleanup", func(t *testing.T) {
		ns := namespace(t, c, "operands")
		csv := createCSV(t, c, ns, "op.v1", "", true)
		createCRDPlan(t, c, ns, "op.v1", "widgets.example.com") // OLM installed the CRD for it
		mine := createWidget(t, c, ns, "mine")
		elsewhere := createWidget(t, c, namespace(t, c, "operands-elsewhere"), "not-targeted")
		if err := c.Delete(ctx, csv); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, mine, "the operand in the OperatorGroup's target namespace")
		waitGone(t, c, csv, "the CSV, once its operands are gone")
		mustExist(t, c, elsewhere, "an operand outside the target namespaces")
	})

	t.Run("a bundled ClusterRole another tenant's CSV of the package still uses", func(t *testing.T) {
		sharedBundledRole(t, c)
	})

	t.Run("a bundled ClusterRole OLM applied once, labelled olm.managed alone", func(t *testing.T) {
		// OLM labels a bundle manifest olm.owner only when it applies its step again (#2985): the
		// plan's step is the evidence. Fails before the fix: no label named the CSV and the role
		// outlived the uninstall.
		ns := namespace(t, c, "applied-once")
		csv := createCSV(t, c, ns, "once.v1", "", false)
		managed := map[string]string{olm.ManagedLabel: olm.ManagedLabelValue}
		role := createClusterRole(t, c, "once-bundled-reader", managed)
		binding := createClusterRoleBinding(t, c, "once-bundled-reader", managed)
		// Named by no step of this namespace's plans, or by a step for another CSV: kept.
		unnamed := createClusterRole(t, c, "once-unnamed", managed)
		elsewhere := createClusterRole(t, c, "once-elsewhere", managed)
		createPlan(t, c, ns, "once.v1",
			rbacStep("once.v1", "ClusterRole", "once-bundled-reader"), rbacStep("once.v1", "ClusterRoleBinding", "once-bundled-reader"))
		createPlan(t, c, namespace(t, c, "applied-once-other"), "once.v1", rbacStep("once.v1", "ClusterRole", "once-elsewhere"))
		if err := c.Delete(ctx, csv); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, csv, "the uninstalled CSV")
		waitGone(t, c, role, "the bundled ClusterRole its plan's step created")
		waitGone(t, c, binding, "the bundled ClusterRoleBinding its plan's step created")
		mustExist(t, c, unnamed, "an unlabelled ClusterRole no step of its namespace names")
		mustExist(t, c, elsewhere, "an unlabelled ClusterRole named by another namespace's plan")
	})
}

// rbacStep is a plan step, as OLM's catalog-operator writes it once applied, that created the
// bundle-manifest object kind/name for the CSV csv.
func rbacStep(csv, kind, name string) *v1alpha1.Step {
	return &v1alpha1.Step{Resolving: csv, Status: "Created", Resource: v1alpha1.StepResource{CatalogSource: "cat", CatalogSourceNamespace: "olm",
		Group: rbacv1.GroupName, Version: "v1", Kind: kind, Name: name}}
}

// startController runs the csv-cleanup reconciler (operand cleanup opt-in) until the test ends.
func startController(t *testing.T, env *testenv.Env) {
	t.Helper()
	o := csvcleanup.DefaultOptions()
	o.OperandCleanup = cleanup.OperandCleanupOptIn
	stop, err := testenv.RunManager(env.Config, testenv.ManagerOptions(), setup.Controller{CSVCleanup: o}.Reconciler(csvcleanup.Name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stopping the controller: %v", err)
		}
	})
}

func namespace(t *testing.T, c client.Client, prefix string) string {
	t.Helper()
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}
	if err := c.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	// Operands live in the namespaces of the one OperatorGroup: here, its own.
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "og", Namespace: n.Name}}
	if err := c.Create(context.Background(), og); err != nil {
		t.Fatal(err)
	}
	og.Status.Namespaces = []string{n.Name}
	og.Status.LastUpdated = metav1.Now()
	if err := c.Status().Update(context.Background(), og); err != nil {
		t.Fatal(err)
	}
	return n.Name
}

// createCSV writes a CSV owning the Widget CRD, with olmguard's finalizer as the webhook adds it.
func createCSV(t *testing.T, c client.Client, ns, name, replaces string, operandCleanup bool) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	csv := &v1alpha1.ClusterServiceVersion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{olmguard.CleanupFinalizer}},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, Replaces: replaces, Cleanup: v1alpha1.CleanupSpec{Enabled: operandCleanup},
			InstallStrategy:           v1alpha1.NamedInstallStrategy{StrategyName: "deployment"},
			CustomResourceDefinitions: v1alpha1.CustomResourceDefinitions{Owned: []v1alpha1.CRDDescription{{Name: "widgets.example.com", Version: "v1", Kind: "Widget"}}}},
	}
	if err := c.Create(context.Background(), csv); err != nil {
		t.Fatal(err)
	}
	return csv
}

func ownerLabels(csv *v1alpha1.ClusterServiceVersion) map[string]string {
	return map[string]string{olm.OwnerLabel: csv.Name, olm.OwnerNamespaceLabel: csv.Namespace, olm.OwnerKindLabel: olm.ClusterServiceVersionKind}
}

func createClusterRole(t *testing.T, c client.Client, name string, labels map[string]string) client.Object {
	t.Helper()
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r
}

func createClusterRoleBinding(t *testing.T, c client.Client, name string, labels map[string]string) client.Object {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"}}
	if err := c.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	return b
}

func createWidgetCRD(t *testing.T, c client.Client) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptrTrue()}}}},
		},
	}
	if err := c.Create(context.Background(), crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Widget CRD is served", func(ctx context.Context) (bool, error) {
		return c.List(ctx, widgetList()) == nil, nil
	})
}

func ptrTrue() *bool { b := true; return &b }

func widgetList() *unstructured.UnstructuredList {
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(widgets.GroupVersion().WithKind("WidgetList"))
	return l
}

func createWidget(t *testing.T, c client.Client, ns, name string) client.Object {
	t.Helper()
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgets)
	w.SetNamespace(ns)
	w.SetName(name)
	if err := c.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func waitGone(t *testing.T, c client.Client, o client.Object, what string) {
	t.Helper()
	testenv.Eventually(t, what+" is deleted", func(ctx context.Context) (bool, error) { return gone(ctx, c, o) })
}

// gone reports whether the apiserver no longer has o.
func gone(ctx context.Context, c client.Client, o client.Object) (bool, error) {
	err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	return false, err
}

// mustExist checks an object the cleanup must keep. It runs after waitGone of the deleted CSV,
// whose cleanup deletes everything it deletes before it releases the finalizer.
func mustExist(t *testing.T, c client.Client, o client.Object, what string) {
	t.Helper()
	got := o.DeepCopyObject().(client.Object)
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(o), got); err != nil {
		t.Errorf("%s: %v", what, err)
	} else if got.GetDeletionTimestamp() != nil {
		t.Errorf("%s is being deleted", what)
	}
}

// createCRDPlan writes an InstallPlan in ns whose status shows, as OLM's catalog-operator writes
// it, a step that created CRD crd for the CSV csv.
func createCRDPlan(t *testing.T, c client.Client, ns, csv, crd string) {
	t.Helper()
	createPlan(t, c, ns, csv, &v1alpha1.Step{Resolving: csv, Status: "Created", Resource: v1alpha1.StepResource{CatalogSource: "cat", CatalogSourceNamespace: ns,
		Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", Name: crd}})
}

// createPlan writes a Complete InstallPlan in ns for the CSV csv with the given steps and the
// CSV's own.
func createPlan(t *testing.T, c client.Client, ns, csv string, steps ...*v1alpha1.Step) {
	t.Helper()
	ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{GenerateName: "install-", Namespace: ns},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{csv}, Approval: v1alpha1.ApprovalAutomatic, Approved: true}}
	if err := c.Create(context.Background(), ip); err != nil {
		t.Fatal(err)
	}
	ip.Status = v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseComplete, CatalogSources: []string{},
		Plan: append(steps, &v1alpha1.Step{Resolving: csv, Status: "Created", Resource: v1alpha1.StepResource{CatalogSource: "cat", CatalogSourceNamespace: ns,
			Group: olm.Group, Version: "v1alpha1", Kind: olm.ClusterServiceVersionKind, Name: csv}})}
	if err := c.Status().Update(context.Background(), ip); err != nil {
		t.Fatal(err)
	}
}
