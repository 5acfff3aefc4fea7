package hostile

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/manifests"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/install"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// The tier's catalog.
var (
	// Mu: the victim runs v1.0.0, a tenant installs v2.0.0 beside it and uninstalls (item 2).
	Mu = realolm.Package{Name: "mu", Versions: []string{"1.0.0", "2.0.0"}}
	// Nu: installed by the cluster admin in the victim's namespace; a tenant's CSV claims its CRD
	// (item 5), and a forged review asks about its Subscription (item 3).
	Nu = realolm.Package{Name: "nu", Versions: []string{"1.0.0"}}
	// Xi: a tenant's own install, whose CSV carries olmguard's cleanup finalizer (item 7); the
	// cluster admin runs it too, in SecondVictimNamespace, so its bundled ClusterRole is shared.
	Xi = realolm.Package{Name: "xi", Versions: []string{"1.0.0"}}
)

const (
	// VictimNamespace is the second tenant's namespace: what the cluster admin installed there
	// must survive every attack.
	VictimNamespace = "tenant-b"
	// SecondVictimNamespace holds the admin's install of Xi: when OLM deletes a tenant's Xi CSV
	// that the tenant labelled olm.copiedFrom (OLM then takes it for an orphaned copy), the
	// ClusterRole Xi's operators share must stay for this one.
	SecondVictimNamespace = "tenant-c"
	// TenantPrefix starts every attacking tenant's namespace (tenant-a-<attack>): each attack runs
	// in a namespace of its own so that the attacks can run side by side.
	TenantPrefix = "tenant-a-"
	// TenantServiceAccount is the attacker's identity in its namespace.
	TenantServiceAccount = "tenant"
)

// olmAggregatedRoles are OLM's aggregated ClusterRoles as OLM's chart ships them
// (operator-framework/operator-lifecycle-manager, deploy/chart/templates/
// 0000_50_olm_09-aggregated.clusterrole.yaml, checked at master 992bb097, after v0.46.0): `edit` (and `admin`) get create, update,
// patch and delete on Subscriptions and delete on CSVs, CatalogSources and InstallPlans; `view`
// (and `edit`, `admin`) get read on OLM's kinds and packagemanifests. So `edit` may NOT create
// CatalogSources or CSVs, nor update CSVs: the attacks that need that say which extra verb they
// grant. (Written from the rules, not copied.)
func olmAggregatedRoles() []*rbacv1.ClusterRole {
	const group = "operators.coreos.com"
	return []*rbacv1.ClusterRole{
		{ObjectMeta: metav1.ObjectMeta{Name: "aggregate-olm-edit", Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-admin": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{group}, Resources: []string{"subscriptions"}, Verbs: []string{"create", "update", "patch", "delete"}},
				{APIGroups: []string{group}, Resources: []string{"clusterserviceversions", "catalogsources", "installplans", "subscriptions"}, Verbs: []string{"delete"}},
			}},
		{ObjectMeta: metav1.ObjectMeta{Name: "aggregate-olm-view", Labels: map[string]string{
			"rbac.authorization.k8s.io/aggregate-to-admin": "true", "rbac.authorization.k8s.io/aggregate-to-edit": "true",
			"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{group}, Resources: []string{"clusterserviceversions", "catalogsources", "installplans", "subscriptions", "operatorgroups"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"packages.operators.coreos.com"}, Resources: []string{"packagemanifests", "packagemanifests/icon"}, Verbs: []string{"get", "list", "watch"}},
			}},
	}
}

// env is the tier's cluster: OLM, olmguard and the victim's installs.
type env struct {
	c        *cluster.Cluster
	olm      *cluster.OLM
	olmguard install.Olmguard
	// victim holds what the admin installed in VictimNamespace: Subscriptions and CSVs (their
	// UIDs must never reach a tenant).
	victimSubs []*v1alpha1.Subscription
	victimUIDs []string

	mu        sync.Mutex
	tenantNSs []string
}

// widgetGVK is the kind of each package's CRD.
func widgetGVK(p realolm.Package) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: p.Group(), Version: "v1", Kind: "Widget"}
}

// newWidget is a Widget of p's CRD.
func newWidget(p realolm.Package, ns, name string) *unstructured.Unstructured {
	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(widgetGVK(p))
	w.SetNamespace(ns)
	w.SetName(name)
	return w
}

// startEnv starts OLM v0.46.0 with the tier's catalog, installs olmguard as the README says, the
// operand grant an administrator gives for Nu's widgets, and the victim's operators.
func startEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t) // the binaries run out of cluster: the apiserver must reach 127.0.0.1
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	o, err := realolm.StartOLM(sctx, c, realolm.Version, Mu, Nu, Xi)
	if err != nil {
		t.Fatalf("starting OLM %s: %v", realolm.Version, err)
	}
	e := &env{c: c, olm: o}
	for _, r := range olmAggregatedRoles() {
		if err := c.Client.Create(ctx, r); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "OLM's aggregated rules in the ClusterRole edit", func(ctx context.Context) (bool, error) {
		edit := &rbacv1.ClusterRole{}
		err := c.Client.Get(ctx, types.NamespacedName{Name: "edit"}, edit)
		for _, r := range edit.Rules {
			if contains(r.Resources, "subscriptions") && contains(r.Verbs, "create") {
				return true, err
			}
		}
		return false, err
	})

	objs, err := manifests.Objects("self-signed", "")
	if err != nil {
		t.Fatal(err)
	}
	install.ApplyRBAC(t, ctx, c, objs)
	// Operand cleanup of Nu's widgets, as README "Operand cleanup" tells an administrator to grant:
	// item 5 checks that a tenant cannot turn this grant against other namespaces.
	// And the CRD of an operator uninstalled earlier: OLM leaves CRDs and their data behind, and
	// no CSV owns it any more.
	if err := e.createLeftoverCRD(ctx); err != nil {
		t.Fatal(err)
	}
	grant := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "hostile-operands", Labels: map[string]string{"olmguard.io/aggregate-to-controller": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{Nu.Group()}, Resources: []string{"widgets"}, Verbs: []string{"list", "delete"}},
			{APIGroups: []string{LeftoverGroup}, Resources: []string{"gadgets"}, Verbs: []string{"list", "delete"}}},
	}
	if err := c.Client.Create(ctx, grant); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the operand grants aggregated into the controller's ClusterRole", func(ctx context.Context) (bool, error) {
		cr := &rbacv1.ClusterRole{}
		err := c.Client.Get(ctx, types.NamespacedName{Name: "olmguard-controller"}, cr)
		for _, r := range cr.Rules {
			if contains(r.Resources, "gadgets") {
				return true, err
			}
		}
		return false, err
	})
	// Default flags, but for the catalog pod grace, which item 6 waits out, and client
	// authentication when clientAuthEnv turns it on (item 3).
	e.olmguard = install.StartAsServiceAccounts(t, ctx, c, install.Options{WebhookArgs: webhookAuthArgs(),
		ControllerArgs: []string{"--catalog-pod-grace=2s"}})

	e.installVictim(t)
	// Item 6's node: only pods bound to it by name run there (a NoSchedule taint keeps the
	// scheduler away), so failing it touches no other attack.
	if err := c.AddNode(ctx, HostileNode, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: HostileNode}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"taints":[{"key":"hostile.olmguard.io/only","effect":"NoSchedule"}]}}`))); err != nil {
		t.Fatal(err)
	}
	return e
}

// HostileNode is the kwok node item 6 fails.
const HostileNode = "hostile-node"

// tenantNamespaces returns the attackers' namespaces created so far.
func (e *env) tenantNamespaces() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.tenantNSs...)
}

// installVictim installs, as the cluster admin, Mu v1.0.0 (Manual approval, so that it stays at
// v1) and Nu in VictimNamespace, and one Widget of each.
func (e *env) installVictim(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := e.c.Client
	if err := e.c.CreateNamespace(ctx, VictimNamespace); err != nil {
		t.Fatal(err)
	}
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "og", Namespace: VictimNamespace},
		Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{VictimNamespace}}}
	if err := c.Create(ctx, og); err != nil {
		t.Fatal(err)
	}
	mu := realolm.NewSubscription(VictimNamespace, "victim-mu", Mu, v1alpha1.ApprovalManual, Mu.CSVName("1.0.0"))
	nu := realolm.NewSubscription(VictimNamespace, "victim-nu", Nu, v1alpha1.ApprovalAutomatic, "")
	for _, s := range []*v1alpha1.Subscription{mu, nu} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	plan, err := realolm.PlanOf(ctx, c, mu)
	if err != nil {
		t.Fatal(err)
	}
	if err := realolm.Approve(ctx, c, plan); err != nil {
		t.Fatal(err)
	}
	for _, csv := range []string{Mu.CSVName("1.0.0"), Nu.CSVName("1.0.0")} {
		if err := realolm.CSVSucceeded(ctx, c, VictimNamespace, csv); err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.ClusterServiceVersion{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: VictimNamespace, Name: csv}, got); err != nil {
			t.Fatal(err)
		}
		e.victimUIDs = append(e.victimUIDs, string(got.UID))
	}
	// Mu stays at v1: its upgrade plan waits for an approval nobody gives.
	if err := realolm.SubscriptionAtLatest(ctx, c, VictimNamespace, nu.Name); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*v1alpha1.Subscription{mu, nu} {
		e.victimSubs = append(e.victimSubs, s)
		e.victimUIDs = append(e.victimUIDs, string(s.UID))
	}
	if err := realolm.NoPlanInstalling(ctx, c, VictimNamespace); err != nil {
		t.Fatal(err)
	}
	// Xi in a namespace of its own: beside Mu's Manual Subscription its plan would be Manual too.
	if err := e.c.CreateNamespace(ctx, SecondVictimNamespace); err != nil {
		t.Fatal(err)
	}
	og = &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "og", Namespace: SecondVictimNamespace},
		Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{SecondVictimNamespace}}}
	if err := c.Create(ctx, og); err != nil {
		t.Fatal(err)
	}
	xi := realolm.NewSubscription(SecondVictimNamespace, "victim-xi", Xi, v1alpha1.ApprovalAutomatic, "")
	if err := c.Create(ctx, xi); err != nil {
		t.Fatal(err)
	}
	if err := realolm.CSVSucceeded(ctx, c, SecondVictimNamespace, Xi.CSVName("1.0.0")); err != nil {
		t.Fatal(err)
	}
	if err := realolm.NoPlanInstalling(ctx, c, SecondVictimNamespace); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{newWidget(Mu, VictimNamespace, "victim-data"), newWidget(Nu, VictimNamespace, "victim-data"),
		newGadget(VictimNamespace, "victim-data")} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// LeftoverGroup is the API group of the CRD gadgets.<LeftoverGroup>, which no CSV owns.
const LeftoverGroup = "leftover.example.com"

// leftoverGVK is the kind of the leftover CRD.
var leftoverGVK = schema.GroupVersionKind{Group: LeftoverGroup, Version: "v1", Kind: "Gadget"}

// createLeftoverCRD creates the CRD gadgets.<LeftoverGroup> (namespaced, any content) and waits
// until it is served.
func (e *env) createLeftoverCRD(ctx context.Context) error {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "gadgets." + LeftoverGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: LeftoverGroup, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}}}}
	if err := e.c.Client.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		g := &unstructured.UnstructuredList{}
		g.SetGroupVersionKind(leftoverGVK.GroupVersion().WithKind("GadgetList"))
		return e.c.Client.List(ctx, g) == nil, nil
	})
}

// newGadget is a Gadget of the leftover CRD.
func newGadget(ns, name string) *unstructured.Unstructured {
	g := &unstructured.Unstructured{}
	g.SetGroupVersionKind(leftoverGVK)
	g.SetNamespace(ns)
	g.SetName(name)
	return g
}

// tenant is an attacker: ServiceAccount TenantServiceAccount of its namespace, bound to the
// built-in ClusterRole edit there and nowhere else.
type tenant struct {
	ns     string
	client client.Client
	config *rest.Config
	rec    *recorder
}

// newTenant creates namespace TenantPrefix+name (with an OperatorGroup targeting it, as the
// cluster admin gives a team), the tenant's ServiceAccount and its RoleBinding to edit, plus extra
// rules in a Role of the namespace when an attack needs more than edit.
func (e *env) newTenant(t *testing.T, name string, extra ...rbacv1.PolicyRule) *tenant {
	t.Helper()
	ctx := context.Background()
	ns := TenantPrefix + name
	e.mu.Lock()
	e.tenantNSs = append(e.tenantNSs, ns)
	e.mu.Unlock()
	c := e.c.Client
	if err := e.c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	objs := []client.Object{
		&olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "og", Namespace: ns}, Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{ns}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: TenantServiceAccount, Namespace: ns}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: TenantServiceAccount}}},
	}
	if len(extra) > 0 {
		objs = append(objs, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-extra", Namespace: ns}, Rules: extra},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-extra", Namespace: ns},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-extra"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: TenantServiceAccount}}})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	tn := &tenant{ns: ns, rec: &recorder{}}
	tn.config = rest.CopyConfig(e.c.Config)
	tn.config.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + TenantServiceAccount,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	tn.config.Wrap(tn.rec.wrap)
	var err error
	if tn.client, err = client.New(tn.config, client.Options{Scheme: c.Scheme()}); err != nil {
		t.Fatal(err)
	}
	// RBAC takes effect at once, but the edit role's aggregation must include OLM's rules.
	testenv.Eventually(t, "the tenant may create Subscriptions in "+ns, func(ctx context.Context) (bool, error) {
		err := tn.client.Create(ctx, realolm.NewSubscription(ns, "rbac-probe", Xi, v1alpha1.ApprovalManual, ""), client.DryRunAll)
		return err == nil, nil
	})
	return tn
}

// isTenantNamespace reports whether ns is an attacker's namespace, whose objects the snapshot
// leaves out: what a tenant does to its own namespace is its own business.
func isTenantNamespace(ns string) bool { return strings.HasPrefix(ns, TenantPrefix) }

// recorder keeps every response the tenant's client received (body and Warning headers), to check
// that none carried another namespace's data.
type recorder struct {
	mu        sync.Mutex
	responses []string
}

func (r *recorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return testenv.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err != nil || resp == nil {
			return resp, err
		}
		body, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if rerr != nil {
			return resp, rerr
		}
		r.add(req.Method + " " + req.URL.Path + "\n" + strings.Join(resp.Header.Values("Warning"), "\n") + "\n" + string(body))
		return resp, nil
	})
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.responses = append(r.responses, s)
}

// leaks returns the recorded responses holding one of secrets.
func (r *recorder) leaks(secrets []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, resp := range r.responses {
		for _, s := range secrets {
			if s != "" && strings.Contains(resp, s) {
				if len(resp) > 600 {
					resp = resp[:600] + "..."
				}
				out = append(out, "holds "+s+": "+resp)
				break
			}
		}
	}
	return out
}

// secrets is what no tenant may learn: the victim's namespace name and its objects' UIDs and
// Subscription names.
func (e *env) secrets() []string {
	out := append([]string{VictimNamespace}, e.victimUIDs...)
	for _, s := range e.victimSubs {
		out = append(out, s.Name)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
