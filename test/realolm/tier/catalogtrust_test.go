package tier

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestCatalogTrust reproduces OLM #3820 on real OLM and closes it. On stock OLM a tenant who may
// write CatalogSources and Subscriptions in its own namespace, and may not bind a ClusterRole,
// serves its own catalog there and subscribes to an operator whose CSV asks for reading every
// Secret of the cluster: OLM installs it and creates a ClusterRole and a ClusterRoleBinding that
// give the operator's ServiceAccount, in the tenant's namespace, Secrets of kube-system. With
// olmguard's --policy-catalog-trust=enforce the tenant's CatalogSource is denied, a Subscription
// to the catalog written before (still served) is denied before OLM resolves it, and one to the
// global catalog namespace still installs.
func TestCatalogTrust(t *testing.T) {
	declare(t, "guard: catalog trust", false)
	c, o := realOLM(t)
	ctx := context.Background()
	dir, images, err := realolm.WriteCatalog(filepath.Join(o.Dir(), "tenant-catalog"), realolm.Kappa, realolm.Lambda)
	if err != nil {
		t.Fatal(err)
	}
	address := must(o.StartCatalogServer(realolm.TenantCatalog, dir, images))(t)
	csvName := realolm.Kappa.CSVName("1.0.0")

	stock := operatorNamespace(t, c, "ct-stock")
	tenant := must(realolm.TenantClient(ctx, c, stock))(t)
	escalate := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{GenerateName: "tenant-"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: stock, Name: "default"}}}
	if err := tenant.Create(ctx, escalate); !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant binding a ClusterRole itself: %v, want it forbidden (the tenant must hold no cluster-wide rights)", err)
	}
	if can := must(realolm.CanListSecretsIn(ctx, c, stock, realolm.Kappa.ServiceAccount(), "kube-system"))(t); can {
		t.Fatalf("ServiceAccount %s/%s may list kube-system's Secrets before any install", stock, realolm.Kappa.ServiceAccount())
	}
	if err := tenant.Create(ctx, realolm.NewTenantCatalog(stock, address)); err != nil {
		t.Fatalf("stock: the tenant's CatalogSource: %v", err)
	}
	if err := o.CatalogReady(ctx, stock, realolm.TenantCatalog); err != nil {
		t.Fatal(err)
	}
	if err := tenant.Create(ctx, realolm.NewTenantSubscription(stock, stock, realolm.Kappa)); err != nil {
		t.Fatalf("stock: the tenant's Subscription: %v", err)
	}
	waitCSV(t, c, stock, csvName)
	var grants []realolm.Grant
	if err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		grants, err = realolm.ClusterGrants(ctx, c.Client, stock, csvName, realolm.Kappa.ServiceAccount())
		return len(grants) > 0, err
	}); err != nil {
		t.Fatalf("stock OLM %s installed %s from the tenant's catalog but no ClusterRole bound to %s/%s was found: %v",
			o.Version, csvName, stock, realolm.Kappa.ServiceAccount(), err)
	}
	g := grants[0]
	if !grantsSecrets(g.Role.Rules) {
		t.Errorf("ClusterRole %s has rules %+v, want the CSV's clusterPermissions (secrets get, list, watch)", g.Role.Name, g.Role.Rules)
	}
	if can := must(realolm.CanListSecretsIn(ctx, c, stock, realolm.Kappa.ServiceAccount(), "kube-system"))(t); !can {
		t.Errorf("ServiceAccount %s/%s may not list kube-system's Secrets after the install, though ClusterRole %s is bound to it", stock, realolm.Kappa.ServiceAccount(), g.Role.Name)
	}
	t.Logf("stock OLM %s: tenant %s's catalog %s/%s (spec.address %s) installed %s; OLM created ClusterRole %s (rules %v) and ClusterRoleBinding %s for ServiceAccount %s/%s, which may now list kube-system's Secrets",
		o.Version, realolm.TenantUser, stock, realolm.TenantCatalog, address, csvName, g.Role.Name, rulesString(g.Role.Rules), g.Binding.Name, stock, realolm.Kappa.ServiceAccount())

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	// OLM's global catalog namespace is olm upstream and openshift-marketplace on OpenShift: the
	// setting an OpenShift user gives (docs/catalog-trust.md).
	procs.RunWebhook(t, c.Kubeconfig, c.Client, "--policy-catalog-trust=enforce", "--global-catalog-namespace="+o.CatalogNamespace)
	guarded := operatorNamespace(t, c, "ct-olmguard")
	guardedTenant := must(realolm.TenantClient(ctx, c, guarded))(t)
	// The apiserver calls the webhook once it has read its configuration: dry runs until then.
	if perr := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		err = guardedTenant.Create(ctx, realolm.NewTenantCatalog(guarded, address), client.DryRunAll)
		return apierrors.IsForbidden(err), nil
	}); perr != nil {
		t.Fatalf("with olmguard (enforce), the tenant's CatalogSource was never denied: last answer %v", err)
	}
	settings := []string{"OLM #3820", "--trusted-catalog-namespaces", "--trusted-catalog-registries", "--policy-catalog-trust"}
	denied := func(what string, err error, want ...string) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Fatalf("with olmguard (enforce), %s: %v, want it denied", what, err)
		}
		for _, s := range append(want, settings...) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("with olmguard (enforce), %s: denied with %q, want it to name %q", what, err, s)
			}
		}
		t.Logf("with olmguard, %s: %v", what, err)
	}
	denied("the tenant's CatalogSource", guardedTenant.Create(ctx, realolm.NewTenantCatalog(guarded, address)),
		"CatalogSource "+guarded+"/"+realolm.TenantCatalog+" is not trusted to serve operators", "namespace "+guarded+" is not a trusted catalog namespace (trusted: "+o.CatalogNamespace+")",
		"spec.address "+address)
	denied("a Subscription to the catalog the tenant wrote before enforcement", tenant.Create(ctx, realolm.NewTenantSubscription(stock, stock, realolm.Lambda)),
		"Subscription "+stock+"/"+realolm.Lambda.Name+" installs from CatalogSource "+stock+"/"+realolm.TenantCatalog+", which is not trusted to serve operators", "spec.address "+address)
	denied("a Subscription to the denied catalog", guardedTenant.Create(ctx, realolm.NewTenantSubscription(guarded, guarded, realolm.Kappa)),
		"CatalogSource "+guarded+"/"+realolm.TenantCatalog+", which is not trusted", "it does not exist")

	// The global catalog namespace stays trusted: the tenant still installs what it offers.
	if err := guardedTenant.Create(ctx, realolm.NewSubscription(guarded, "beta", realolm.Beta, v1alpha1.ApprovalAutomatic, "")); err != nil {
		t.Fatalf("with olmguard, a Subscription to the global catalog: %v, want it admitted", err)
	}
	waitCSV(t, c, guarded, realolm.Beta.CSVName("1.0.0"))
	for _, ns := range []string{stock, guarded} {
		for _, pkg := range []realolm.Package{realolm.Kappa, realolm.Lambda} {
			if ns == stock && pkg.Name == realolm.Kappa.Name {
				continue // installed on stock
			}
			if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: pkg.CSVName("1.0.0")}, &v1alpha1.ClusterServiceVersion{}); !apierrors.IsNotFound(err) {
				t.Errorf("with olmguard, CSV %s/%s: %v, want none", ns, pkg.CSVName("1.0.0"), err)
			}
		}
	}
	if can := must(realolm.CanListSecretsIn(ctx, c, guarded, realolm.Kappa.ServiceAccount(), "kube-system"))(t); can {
		t.Errorf("with olmguard, ServiceAccount %s/%s may list kube-system's Secrets", guarded, realolm.Kappa.ServiceAccount())
	}
	checkLogs(t, o)
}

// grantsSecrets reports whether rules let their subject get and list Secrets.
func grantsSecrets(rules []rbacv1.PolicyRule) bool {
	verbs := map[string]bool{}
	for _, r := range rules {
		core := false
		for _, g := range r.APIGroups {
			core = core || g == ""
		}
		for _, res := range r.Resources {
			if core && res == "secrets" {
				for _, v := range r.Verbs {
					verbs[v] = true
				}
			}
		}
	}
	return verbs["get"] && verbs["list"]
}

func rulesString(rules []rbacv1.PolicyRule) string {
	var out []string
	for _, r := range rules {
		out = append(out, strings.Join(r.Verbs, ",")+" "+strings.Join(r.Resources, ","))
	}
	return strings.Join(out, "; ")
}
