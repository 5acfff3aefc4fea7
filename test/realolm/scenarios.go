package realolm

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/authz"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// Version is the OLM release the tier runs by default (OLMGUARD_OLM_VERSION overrides it).
const Version = "v0.46.0"

// The catalog every test installs from.
var (
	Alpha = Package{Name: "alpha", Versions: []string{"1.0.0", "2.0.0", "3.0.0"}}
	Beta  = Package{Name: "beta", Versions: []string{"1.0.0"}}
	// Gamma and Delta are each installed once, by the F3 test, so no other CSV shares their
	// bundled ClusterRole: stock OLM, then olmguard, uninstalls them.
	Gamma = Package{Name: "gamma", Versions: []string{"1.0.0"}}
	Delta = Package{Name: "delta", Versions: []string{"1.0.0"}}
	// Iota opts in to operand cleanup (spec.cleanup.enabled), uninstalled by the F3 test with
	// olmguard.
	Iota = Package{Name: "iota", Versions: []string{"1.0.0"}, CleanupEnabled: true}
)

// CatalogName is the CatalogSource in OLM's global catalog namespace serving Alpha and Beta.
const CatalogName = "realolm"

// CatalogNamespace is where the test catalog's CatalogSource lives: the global catalog namespace
// of the OLM build the tests run (cluster.LayoutFor). The real-OLM tier sets it once, before its
// first test, for the build it runs; it stays upstream's for every other caller.
var CatalogNamespace = cluster.OLMNamespace

// The scenarios below are what the tests and `make demo` replay on real OLM. They return errors
// instead of failing a test, and wait at most testenv.Patience for each state.

// OperatorNamespace creates a fresh namespace (testenv.NewNamespace) with an OperatorGroup
// targeting it.
func OperatorNamespace(ctx context.Context, c client.Client, prefix string) (string, error) {
	ns, err := testenv.NewNamespace(ctx, c, prefix)
	if err != nil {
		return "", err
	}
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "og", Namespace: ns},
		Spec: olmv1.OperatorGroupSpec{TargetNamespaces: []string{ns}}}
	return ns, c.Create(ctx, og)
}

// NewSubscription is a Subscription to pkg from the test catalog.
func NewSubscription(ns, name string, pkg Package, approval v1alpha1.Approval, startingCSV string) *v1alpha1.Subscription {
	return &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.SubscriptionSpec{Package: pkg.Name, Channel: "stable", CatalogSource: CatalogName,
			CatalogSourceNamespace: CatalogNamespace, InstallPlanApproval: approval, StartingCSV: startingCSV}}
}

// CSVSucceeded waits until CSV name in ns reaches phase Succeeded.
func CSVSucceeded(ctx context.Context, c client.Client, ns, name string) error {
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		csv := &v1alpha1.ClusterServiceVersion{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, csv)
		return err == nil && csv.Status.Phase == v1alpha1.CSVPhaseSucceeded, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("CSV %s/%s never Succeeded: %w", ns, name, err)
	}
	return nil
}

// CSVFailed waits until CSV name in ns reaches phase Failed with reason.
func CSVFailed(ctx context.Context, c client.Client, ns, name string, reason v1alpha1.ConditionReason) error {
	var csv v1alpha1.ClusterServiceVersion
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &csv)
		return err == nil && csv.Status.Phase == v1alpha1.CSVPhaseFailed && csv.Status.Reason == reason, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("CSV %s/%s is %s (%s), want Failed (%s): %w", ns, name, csv.Status.Phase, csv.Status.Reason, reason, err)
	}
	return nil
}

// ResolutionFailed waits until OLM marks sub ResolutionFailed with reason.
func ResolutionFailed(ctx context.Context, c client.Client, sub *v1alpha1.Subscription, reason string) error {
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		s := &v1alpha1.Subscription{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sub), s); err != nil {
			return false, err
		}
		cond := s.Status.GetCondition(v1alpha1.SubscriptionResolutionFailed)
		return cond != nil && cond.Status == corev1.ConditionTrue && cond.Reason == reason, nil
	})
	if err != nil {
		return fmt.Errorf("OLM never failed the resolution of Subscription %s/%s with %s: %w", sub.Namespace, sub.Name, reason, err)
	}
	return nil
}

// Gone waits until obj (by UID) no longer exists: a deleted CSV with olmguard's finalizer stays
// until its cleanup is done.
func Gone(ctx context.Context, c client.Client, obj client.Object) error {
	uid := obj.GetUID()
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		now := obj.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), now)
		return apierrors.IsNotFound(err) || (err == nil && now.GetUID() != uid), client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("%s %s/%s never went: %w", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetNamespace(), obj.GetName(), err)
	}
	return nil
}

// Resync touches sub's olmguard resync annotation: any change of a Subscription makes OLM
// resolve its namespace again.
func Resync(ctx context.Context, c client.Client, sub *v1alpha1.Subscription) error {
	patch := []byte(`{"metadata":{"annotations":{"` + olmguard.ResyncAnnotation + `":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`)
	return c.Patch(ctx, sub, client.RawPatch(types.MergePatchType, patch))
}

// PlanOf waits until OLM points sub at a plan, and returns the plan.
func PlanOf(ctx context.Context, c client.Client, sub *v1alpha1.Subscription) (*v1alpha1.InstallPlan, error) {
	return NextPlan(ctx, c, sub, "")
}

// SubscriptionAtLatest waits for the Subscription's status to catch up with its CSV (it trails
// the CSV's Succeeded by up to a second on real OLM).
func SubscriptionAtLatest(ctx context.Context, c client.Client, ns, name string) error {
	return testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		sub := &v1alpha1.Subscription{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sub); err != nil {
			return false, err
		}
		return sub.Status.State == v1alpha1.SubscriptionStateAtLatest && sub.Status.InstalledCSV != "", nil
	})
}

// SubscriptionInstalled waits until OLM records csv as sub's status.installedCSV: it does so once
// the CSV exists, a moment after the plan that created it.
func SubscriptionInstalled(ctx context.Context, c client.Client, sub *v1alpha1.Subscription, csv string) error {
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.Subscription{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sub), got); err != nil {
			return false, err
		}
		return got.Status.InstalledCSV == csv, nil
	})
	if err != nil {
		return fmt.Errorf("OLM never recorded %s as installed by Subscription %s/%s: %w", csv, sub.Namespace, sub.Name, err)
	}
	return nil
}

// NoPlanInstalling waits until no InstallPlan of ns is Installing: a plan that is executes to its
// end whether or not its Subscription and CSVs still exist, and recreates what it lists.
func NoPlanInstalling(ctx context.Context, c client.Client, ns string) error {
	return testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		plans := &v1alpha1.InstallPlanList{}
		if err := c.List(ctx, plans, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, p := range plans.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == v1alpha1.InstallPlanPhaseInstalling {
				return false, nil
			}
		}
		return true, nil
	})
}

// PlansGone waits until the InstallPlans of ns are garbage-collected with their Subscription. An
// uninstall deletes the CSV only then: OLM can execute a plan it still holds after its CSV was
// deleted and recreate the CSV with no Subscription (seen on OpenShift 4.18 and 4.20 under load,
// olm-facts "Uninstalling while the upgrade InstallPlan is still Installing").
func PlansGone(ctx context.Context, c client.Client, ns string) error {
	var left int
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		plans := &v1alpha1.InstallPlanList{}
		if err := c.List(ctx, plans, client.InNamespace(ns)); err != nil {
			return false, err
		}
		left = len(plans.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d InstallPlan(s) of %s not garbage-collected: %w", left, ns, err)
	}
	return nil
}

// DeleteCSV deletes csv and waits until it is gone. OLM may still execute a plan it held in its
// cache and create the CSV again after the delete (docs/cleanup.md, olm-facts "Uninstalling while
// the upgrade InstallPlan is still Installing"): such a CSV is deleted again, as an administrator
// would, and counted.
func DeleteCSV(ctx context.Context, c client.Client, csv *v1alpha1.ClusterServiceVersion) (recreated int, err error) {
	key, uid := client.ObjectKeyFromObject(csv), csv.UID
	if err := c.Delete(ctx, csv); client.IgnoreNotFound(err) != nil {
		return 0, err
	}
	err = testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		now := &v1alpha1.ClusterServiceVersion{}
		err := c.Get(ctx, key, now)
		if err == nil && now.UID != uid && now.DeletionTimestamp == nil {
			recreated++
			uid = now.UID
			return false, client.IgnoreNotFound(c.Delete(ctx, now, client.Preconditions{UID: &uid}))
		}
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err != nil {
		return recreated, fmt.Errorf("CSV %s not deleted: %w", key, err)
	}
	return recreated, nil
}

// F1Result is one namespace of an F1 round: Subscription B and the plan it was installed by.
type F1Result struct {
	NS   string
	Sub  *v1alpha1.Subscription
	Plan *v1alpha1.InstallPlan
}

// F1Round is one interleaving of OLM #3199, replayed in n fresh namespaces side by side.
type F1Round func(ctx context.Context, c client.Client, prefix string, n int) ([]F1Result, error)

// SettledThenSecond installs Beta through Subscription A and, the moment A's CSV succeeds,
// subscribes B to Alpha. OLM is then still syncing the namespace for A; it resolves both
// Subscriptions for B's plan but may write the plan's owners from a list taken before B existed
// (OLM #3199, olm-facts.md §1.5).
func SettledThenSecond(ctx context.Context, c client.Client, prefix string, n int) ([]F1Result, error) {
	return f1Round(ctx, c, prefix, n, v1alpha1.ApprovalAutomatic, func(ctx context.Context, r *F1Result, _ *v1alpha1.Subscription) error {
		return CSVSucceeded(ctx, c, r.NS, Beta.CSVName("1.0.0"))
	})
}

// SettledThenSecondInTurn is SettledThenSecond one namespace after another, as a user installs:
// each namespace gets A, then B the moment A's CSV succeeds, and the next namespace starts once
// B's plan exists. OLM then syncs each namespace alone, without its client-side limit spreading
// the syncs of several; this is the order in which stock OLM misses B most often (olm-facts
// "#3199 frequency": 5 of 8 namespaces on v0.46.0, against rarely side by side).
func SettledThenSecondInTurn(ctx context.Context, c client.Client, prefix string, n int) ([]F1Result, error) {
	var results []F1Result
	for range n {
		r, err := f1Round(ctx, c, prefix, 1, v1alpha1.ApprovalAutomatic, func(ctx context.Context, r *F1Result, _ *v1alpha1.Subscription) error {
			return CSVSucceeded(ctx, c, r.NS, Beta.CSVName("1.0.0"))
		})
		if err != nil {
			return nil, err
		}
		results = append(results, r...)
	}
	return results, nil
}

// ManualThenAutomatic is the reproduction of OLM #3199: Subscription A with Manual approval, its
// plan approved, and at once Subscription B with Automatic approval. The approval starts a
// namespace sync; B created between its two Subscription lists is resolved but left out of the
// owners of the plan that installs it.
func ManualThenAutomatic(ctx context.Context, c client.Client, prefix string, n int) ([]F1Result, error) {
	return f1Round(ctx, c, prefix, n, v1alpha1.ApprovalManual, func(ctx context.Context, r *F1Result, a *v1alpha1.Subscription) error {
		plan, err := PlanOf(ctx, c, a)
		if err != nil {
			return err
		}
		return Approve(ctx, c, plan)
	})
}

// f1Round subscribes A to Beta with approvalA in n fresh namespaces, then in each, side by side,
// runs before and subscribes B to Alpha, and returns B and its plan.
func f1Round(ctx context.Context, c client.Client, prefix string, n int, approvalA v1alpha1.Approval,
	before func(context.Context, *F1Result, *v1alpha1.Subscription) error) ([]F1Result, error) {
	results := make([]F1Result, n)
	subs := make([]*v1alpha1.Subscription, n)
	for i := range results {
		ns, err := OperatorNamespace(ctx, c, prefix)
		if err != nil {
			return nil, err
		}
		results[i].NS = ns
		subs[i] = NewSubscription(ns, "a", Beta, approvalA, "")
		if err := c.Create(ctx, subs[i]); err != nil {
			return nil, err
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func(r *F1Result, a *v1alpha1.Subscription, err *error) {
			defer wg.Done()
			if *err = before(ctx, r, a); *err != nil {
				return
			}
			r.Sub = NewSubscription(r.NS, "b", Alpha, v1alpha1.ApprovalAutomatic, "")
			if *err = c.Create(ctx, r.Sub); *err != nil {
				return
			}
			r.Plan, *err = PlanOf(ctx, c, r.Sub)
		}(&results[i], subs[i], &errs[i])
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("namespace %s: %w", results[i].NS, err)
		}
	}
	return results, nil
}

// Missing returns the results whose plan lacks Subscription B's ownerReference.
func Missing(results []F1Result) []F1Result {
	var out []F1Result
	for _, r := range results {
		if !scenario.OwnedBy(r.Plan, r.Sub.UID) {
			out = append(out, r)
		}
	}
	return out
}

// Uninstalled is what an uninstall of a settled operator left.
type Uninstalled struct {
	NS       string
	RoleLeft bool // the bundle's ClusterRole, as OLM created it for this install
	// RoleLabelled: when the CSV was deleted, the bundle's ClusterRole carried olm.owner=<CSV>,
	// the only mark OLM writes on it. OLM creates it labelled olm.managed alone and adds
	// olm.owner only when it applies the plan step again, which it does when its first status
	// write of the plan was lost to a conflict (catalog StepEnsurer.EnsureClusterRole; OLM
	// #2985). Without the label nothing OLM wrote ties the role to the CSV once its plans are
	// gone, and olmguard keeps it (docs/cleanup.md, "A bundled ClusterRole OLM applied once").
	RoleLabelled bool
	OperandLeft  bool // the Widget the user created
	// RoleCreatedAgain is a ClusterRole of the bundle's name that OLM created after the uninstall
	// began: a plan step it was still executing from its cache (docs/cleanup.md, "Uninstall
	// during an install"). Such a role is labelled olm.managed alone, so nothing says whose it
	// is; Uninstall deletes it, as docs/cleanup.md tells an administrator to, and reports it here.
	RoleCreatedAgain bool
	// Recreated counts the CSVs OLM created again after the uninstall, each deleted again.
	Recreated int
}

// RoleLeftLabelled reports the failure olmguard fixes: the bundle's ClusterRole, labelled
// olm.owner=<CSV> by OLM, outlived the uninstall.
func (u Uninstalled) RoleLeftLabelled() bool { return u.RoleLeft && u.RoleLabelled }

// UnlabelledRole is "" when OLM labelled the bundle's ClusterRole olm.owner, else what that
// means for its cleanup.
func (u Uninstalled) UnlabelledRole() string {
	if u.RoleLabelled {
		return ""
	}
	return "OLM applied the bundled ClusterRole once and never labelled it olm.owner (OLM #2985): nothing OLM wrote ties it to the CSV once its plans are gone"
}

// Uninstall installs pkg in a fresh namespace, creates one operand, waits until the install has
// settled, then uninstalls the operator as a user does (delete the Subscription, then the CSV once
// its plans are garbage-collected) and waits until the CSV is gone. OLM may still execute a plan
// it held in its cache and create the CSV again (docs/cleanup.md); such a CSV is deleted again, as
// an administrator would, and counted in Recreated.
func Uninstall(ctx context.Context, c client.Client, pkg Package, prefix string) (Uninstalled, error) {
	ns, err := OperatorNamespace(ctx, c, prefix)
	out := Uninstalled{NS: ns}
	if err != nil {
		return out, err
	}
	sub := NewSubscription(ns, pkg.Name, pkg, v1alpha1.ApprovalAutomatic, "")
	if err := c.Create(ctx, sub); err != nil {
		return out, err
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	csv.Namespace, csv.Name = ns, pkg.CSVName(pkg.Versions[0])
	if err := CSVSucceeded(ctx, c, ns, csv.Name); err != nil {
		return out, err
	}
	if err := SubscriptionAtLatest(ctx, c, ns, sub.Name); err != nil {
		return out, err
	}
	if err := NoPlanInstalling(ctx, c, ns); err != nil {
		return out, err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(csv), csv); err != nil {
		return out, err
	}
	operand := &unstructured.Unstructured{}
	operand.SetGroupVersionKind(schema.GroupVersionKind{Group: pkg.Group(), Version: "v1", Kind: "Widget"})
	operand.SetNamespace(ns)
	operand.SetName("data")
	if err := c.Create(ctx, operand); err != nil {
		return out, err
	}
	role := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKey{Name: pkg.BundledClusterRole()}, role); err != nil {
		return out, fmt.Errorf("OLM did not create the bundled ClusterRole: %w", err)
	}
	if err := c.Delete(ctx, sub); err != nil {
		return out, err
	}
	if err := PlansGone(ctx, c, ns); err != nil {
		return out, err
	}
	// The plans are gone: OLM applies none of their steps again, so the role's labels are final.
	before := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(role), before); err != nil {
		return out, fmt.Errorf("the bundled ClusterRole before the CSV's deletion: %w", err)
	}
	out.RoleLabelled = before.Labels[olm.OwnerLabel] == csv.Name
	if out.Recreated, err = DeleteCSV(ctx, c, csv); err != nil {
		return out, err
	}
	now := &rbacv1.ClusterRole{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(role), now); {
	case err == nil && now.UID == role.UID:
		out.RoleLeft = true
	case err == nil:
		out.RoleCreatedAgain = true
		uid := now.UID
		if err := c.Delete(ctx, now, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return out, err
		}
	case !apierrors.IsNotFound(err):
		return out, err
	}
	operandErr := c.Get(ctx, client.ObjectKeyFromObject(operand), operand.DeepCopy())
	out.OperandLeft = operandErr == nil
	return out, nil
}

// UseOLMCRDs makes the clusters started after it serve OLM's own CRDs, which OLM's operators need
// (Operator, OperatorCondition, OLMConfig, ...): the directory in OLMGUARD_OLM_CRDS, or
// ../shared/olm-crds beside the checkout.
func UseOLMCRDs() error {
	dir := os.Getenv(testenv.EnvOLMCRDs)
	if dir == "" {
		root, err := testbin.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "..", "shared", "olm-crds")
		if err := os.Setenv(testenv.EnvOLMCRDs, dir); err != nil {
			return err
		}
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("OLM's CRDs (set %s): %w", testenv.EnvOLMCRDs, err)
	}
	return nil
}

// StartOLM runs OLM version on c and serves pkgs from the catalog CatalogName, READY on return.
func StartOLM(ctx context.Context, c *cluster.Cluster, version string, pkgs ...Package) (*cluster.OLM, error) {
	return StartOLMWith(ctx, c, version, cluster.OLMOptions{}, pkgs...)
}

// StartOLMWith is StartOLM with OLM run as opts says.
func StartOLMWith(ctx context.Context, c *cluster.Cluster, version string, opts cluster.OLMOptions, pkgs ...Package) (*cluster.OLM, error) {
	o, err := c.StartOLMWith(ctx, version, opts)
	if err != nil {
		return nil, err
	}
	// Beside OLM's logs, not in a test's TempDir: every later test unpacks bundles from here.
	dir, images, err := WriteCatalog(filepath.Join(o.Dir(), "catalog"), pkgs...)
	if err != nil {
		return nil, err
	}
	return o, o.ServeCatalog(ctx, CatalogName, dir, images)
}

// The OLM releases of F4's field scenario (OLM #3210): v0.25 finds unpack Jobs by name and leaves
// them unlabelled; v0.26 to v0.28 find them by label only.
const (
	OLMBefore = "v0.25.0"
	OLMAfter  = "v0.28.0"
)

// Zeta is the operator installed twice across the OLM upgrade.
var Zeta = Package{Name: "zeta", Versions: []string{"1.0.0"}}

// UpgradeCluster is a one-node cluster of its own running OLM v0.25 with a catalog serving Zeta.
type UpgradeCluster struct {
	C   *cluster.Cluster
	OLM *cluster.OLM
}

// StartUpgradeCluster starts the cluster name with OLM OLMBefore. Stop it with C.Stop.
func StartUpgradeCluster(ctx context.Context, name string, log io.Writer) (*UpgradeCluster, error) {
	c, err := cluster.Start(ctx, cluster.Options{Name: name, Nodes: 1, Log: log})
	if err != nil {
		return nil, err
	}
	u := &UpgradeCluster{C: c}
	if u.OLM, err = StartOLM(ctx, c, OLMBefore, Zeta); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return u, nil
}

// UpgradeOLM stops OLM OLMBefore and starts OLMAfter on the same cluster, as an OLM upgrade does.
func (u *UpgradeCluster) UpgradeOLM(ctx context.Context) error {
	u.OLM.Stop()
	var err error
	u.OLM, err = StartOLM(ctx, u.C, OLMAfter, Zeta)
	return err
}

// InstallZeta subscribes to Zeta in a fresh namespace.
func (u *UpgradeCluster) InstallZeta(ctx context.Context, prefix string) (string, error) {
	ns, err := OperatorNamespace(ctx, u.C.Client, prefix)
	if err != nil {
		return "", err
	}
	return ns, u.C.Client.Create(ctx, NewSubscription(ns, Zeta.Name, Zeta, v1alpha1.ApprovalAutomatic, ""))
}

// The tenant of the catalog trust scenario (OLM #3820): a user who may write CatalogSources and
// Subscriptions in one namespace and nothing cluster-wide.
const TenantUser = "tenant-developer"

// TenantCatalog is the CatalogSource the tenant serves in its own namespace.
const TenantCatalog = "tenant-catalog"

// Kappa and Lambda are served only by the tenant's catalog. Their CSVs ask for what an operator
// asking for too much asks: reading every Secret of the cluster (clusterPermissions).
var (
	secretsEverywhere = []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}}}
	Kappa             = Package{Name: "kappa", Versions: []string{"1.0.0"}, ClusterRules: secretsEverywhere}
	Lambda            = Package{Name: "lambda", Versions: []string{"1.0.0"}, ClusterRules: secretsEverywhere}
)

// TenantClient returns a client acting as TenantUser, who is bound in ns to a Role that may
// create CatalogSources and Subscriptions there (as a cluster delegating catalogs to its teams
// grants; OLM's own aggregated roles give namespace admins Subscriptions but not CatalogSources).
func TenantClient(ctx context.Context, c *cluster.Cluster, ns string) (client.Client, error) {
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-tenant"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"operators.coreos.com"}, Resources: []string{"catalogsources", "subscriptions"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"operators.coreos.com"}, Resources: []string{"operatorgroups", "installplans", "clusterserviceversions"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "operator-tenant"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: TenantUser}}}
	for _, o := range []client.Object{role, binding} {
		if err := c.Client.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	if err := authz.WaitAllowed(ctx, c.Client, TenantUser, nil, authorizationv1.ResourceAttributes{
		Namespace: ns, Verb: "create", Group: "operators.coreos.com", Resource: "subscriptions"}); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: TenantUser}
	return client.New(cfg, client.Options{Scheme: c.Client.Scheme()})
}

// NewTenantCatalog is the CatalogSource TenantCatalog in ns, served from address.
func NewTenantCatalog(ns, address string) *v1alpha1.CatalogSource {
	return &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: TenantCatalog},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: address, DisplayName: "a tenant's own catalog"}}
}

// NewTenantSubscription is a Subscription in ns to pkg from the catalog sourceNS/TenantCatalog.
func NewTenantSubscription(ns, sourceNS string, pkg Package) *v1alpha1.Subscription {
	s := NewSubscription(ns, pkg.Name, pkg, v1alpha1.ApprovalAutomatic, "")
	s.Spec.CatalogSource, s.Spec.CatalogSourceNamespace = TenantCatalog, sourceNS
	return s
}

// Grant is a ClusterRole OLM created for a CSV's clusterPermissions and the ClusterRoleBinding
// binding it to the operator's ServiceAccount.
type Grant struct {
	Role    rbacv1.ClusterRole
	Binding rbacv1.ClusterRoleBinding
}

// ClusterGrants returns what OLM granted cluster-wide for CSV csv in ns: the ClusterRoles it
// labels as the CSV's (olm.owner, olm.owner.namespace) with a ClusterRoleBinding to the
// ServiceAccount sa of ns.
func ClusterGrants(ctx context.Context, c client.Client, ns, csv, sa string) ([]Grant, error) {
	owned := client.MatchingLabels{"olm.owner": csv, "olm.owner.namespace": ns}
	roles, bindings := &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}
	if err := c.List(ctx, roles, owned); err != nil {
		return nil, err
	}
	if err := c.List(ctx, bindings, owned); err != nil {
		return nil, err
	}
	var out []Grant
	for _, r := range roles.Items {
		for _, b := range bindings.Items {
			if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != r.Name {
				continue
			}
			for _, s := range b.Subjects {
				if s.Kind == rbacv1.ServiceAccountKind && s.Namespace == ns && s.Name == sa {
					out = append(out, Grant{Role: r, Binding: b})
				}
			}
		}
	}
	return out, nil
}

// CanListSecretsIn reports whether ServiceAccount ns/sa may list the Secrets of namespace other,
// as the apiserver's authorizer answers.
func CanListSecretsIn(ctx context.Context, c *cluster.Cluster, ns, sa, other string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:               "system:serviceaccount:" + ns + ":" + sa,
		Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: other, Verb: "list", Resource: "secrets"}}}
	got, err := c.Clientset.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return got.Status.Allowed, nil
}
