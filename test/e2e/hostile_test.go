package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestHostileObjects: objects made to look like another tenant's or like OLM's get olmguard to
// delete or rewrite nothing. Both binaries run with exactly the manifests' RBAC, plus the operand
// grant an administrator gives for widgets (README, "Operand cleanup").
func TestHostileObjects(t *testing.T) {
	c := cluster.Shared(t)
	c.SkipUnlessKwok(t) // the binaries run out of cluster: the apiserver must reach 127.0.0.1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	objs, err := manifests.Objects("self-signed", "")
	if err != nil {
		t.Fatal(err)
	}
	applyManifestRBAC(t, ctx, c, objs)
	grant := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-hostile-widgets", Labels: map[string]string{"olmguard.io/aggregate-to-controller": "true"}},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{widgetGVK.Group}, Resources: []string{"widgets"}, Verbs: []string{"list", "delete"}}},
	}
	if err := c.Client.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.Delete(context.Background(), grant) })
	testenv.Eventually(t, "widgets aggregated into the controller's ClusterRole", func(ctx context.Context) (bool, error) {
		cr := &rbacv1.ClusterRole{}
		err := c.Client.Get(ctx, types.NamespacedName{Name: "olmguard-controller"}, cr)
		return slices.ContainsFunc(cr.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "widgets") }), err
	})
	webhook, controller := startAsServiceAccounts(t, ctx, c, "--drift-window=2s")
	sim := newSim(t, c, "olm-hostile", olmsim.V0_46)

	t.Run("a CSV named like another namespace's", func(t *testing.T) {
		// One catalog, installed twice: two CSVs gamma.v1.0.0 sharing the bundled ClusterRole and
		// the auth-reader RoleBinding of the same webhook Service name.
		cat := scenario.GammaCatalog("hostile-gamma")
		if _, err := scenario.InstallGamma(ctx, sim, cat, "hostile-a"); err != nil {
			t.Fatal(err)
		}
		subB, err := scenario.InstallGamma(ctx, sim, cat, "hostile-b")
		if err != nil {
			t.Fatal(err)
		}
		before, err := scenario.CountLeftovers(ctx, c.Client, cat, "hostile-a")
		if err != nil || before.Labelled == 0 || before.Bundled == 0 || before.AuthReader == 0 {
			t.Fatalf("hostile-a's cluster objects before: %+v (err %v), want some of each", before, err)
		}
		uninstall(t, ctx, c, sim, subB)
		waitCSVGone(t, ctx, c, "hostile-b", "gamma.v1.0.0", testenv.Patience)
		if b, err := scenario.CountLeftovers(ctx, c.Client, cat, "hostile-b"); err != nil || b.Labelled != 0 {
			t.Errorf("hostile-b's own labelled objects after its uninstall: %+v (err %v), want 0", b, err)
		}
		after, err := scenario.CountLeftovers(ctx, c.Client, cat, "hostile-a")
		if err != nil || after != before {
			t.Errorf("hostile-a's cluster objects after hostile-b's uninstall: %+v (err %v), want %+v", after, err, before)
		}
		csv, err := getCSV(ctx, c, "hostile-a", "gamma.v1.0.0")
		if err != nil || csv.DeletionTimestamp != nil || !slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
			t.Errorf("hostile-a's CSV after hostile-b's uninstall: err %v, being deleted %v, finalizers %v", err, csv.DeletionTimestamp != nil, csv.Finalizers)
		}
		// hostile-a goes too, and with the last CSV of the package its shared objects: while any
		// gamma CSV runs, every gamma cluster object stays (issue 31, item 2), and later tests
		// uninstall gammas of their own and count what is left.
		subA := &v1alpha1.Subscription{}
		if err := c.Client.Get(ctx, types.NamespacedName{Namespace: "hostile-a", Name: "gamma"}, subA); err != nil {
			t.Fatal(err)
		}
		uninstall(t, ctx, c, sim, subA)
		waitCSVGone(t, ctx, c, "hostile-a", "gamma.v1.0.0", testenv.Patience)
		if l, err := scenario.CountLeftovers(ctx, c.Client, cat, "hostile-a"); err != nil || l.Total() != 0 {
			t.Errorf("gamma's cluster objects after the last gamma's uninstall: %+v (err %v), want none", l, err)
		}
	})

	t.Run("another version of a package another tenant runs", func(t *testing.T) {
		// Issue 31, item 2: team-a runs zeta v1.0.0; team-b installs v2.0.0 in its own namespace,
		// and OLM relabels the bundled ClusterRole both share olm.owner=zeta.v2.0.0 (#2985); team-b
		// uninstalls. Fails before the fix: olmguard's cleanup of zeta.v2.0.0 deleted the role
		// while team-a's zeta.v1.0.0 still ran (stock OLM keeps it).
		v1 := olmsim.Bundle{Package: "zeta", Channel: "stable", CSVName: "zeta.v1.0.0", Version: "1.0.0",
			Image: "registry.example/zeta-bundle:v1.0.0", BundledClusterRole: "hostile-zeta-reader"}
		v2 := v1
		v2.CSVName, v2.Version, v2.Image = "zeta.v2.0.0", "2.0.0", "registry.example/zeta-bundle:v2.0.0"
		installOperator(t, ctx, sim, &olmsim.Catalog{Name: "hostile-zeta-v1", Bundles: []olmsim.Bundle{v1}}, "hostile-zeta-a", "zeta", "hostile-zeta-a")
		subB := installOperator(t, ctx, sim, &olmsim.Catalog{Name: "hostile-zeta-v2", Bundles: []olmsim.Bundle{v2}}, "hostile-zeta-b", "zeta", "hostile-zeta-b")
		role := &rbacv1.ClusterRole{}
		if err := c.Client.Get(ctx, types.NamespacedName{Name: "hostile-zeta-reader"}, role); err != nil || role.Labels[olm.OwnerLabel] != "zeta.v2.0.0" {
			t.Fatalf("bundled ClusterRole labels %v (err %v), want olm.owner=zeta.v2.0.0", role.Labels, err)
		}
		uninstall(t, ctx, c, sim, subB)
		waitCSVGone(t, ctx, c, "hostile-zeta-b", "zeta.v2.0.0", testenv.Patience)
		if err := c.Client.Get(ctx, types.NamespacedName{Name: "hostile-zeta-reader"}, role); err != nil || role.DeletionTimestamp != nil {
			t.Errorf("the bundled ClusterRole team-a's zeta.v1.0.0 still uses, after team-b's uninstall: err %v", err)
		}
	})

	t.Run("a CSV claiming another tenant's CRD", func(t *testing.T) {
		owner := &olmsim.Catalog{Name: "hostile-widgets", Bundles: []olmsim.Bundle{widgetBundle("owner", 1)}}
		installOperator(t, ctx, sim, owner, "hostile-owner", "owner", "hostile-tenant")
		createOperands(t, ctx, c, widgetGVK, "hostile-tenant", 4)
		// Another operator, in all namespaces, claims the same CRD and opts in to operand cleanup.
		claimant := &olmsim.Catalog{Name: "hostile-claimant", Bundles: []olmsim.Bundle{widgetBundle("claimant", 1)}}
		sub := installOperator(t, ctx, sim, claimant, "hostile-claimant", "claimant")
		uninstall(t, ctx, c, sim, sub)
		waitCSVGone(t, ctx, c, "hostile-claimant", "claimant.v1", testenv.Patience)
		if n := countOperands(t, ctx, c, widgetGVK, "hostile-tenant"); n != 4 {
			t.Errorf("the tenant has %d of 4 custom resources left", n)
		}
	})

	t.Run("an InstallPlan referencing Subscriptions in another namespace", func(t *testing.T) {
		x, y := "hostile-ip-x", "hostile-ip-y"
		subscription := func(ns, name string) *v1alpha1.Subscription {
			s := builders.Subscription(ns, name, name, v1alpha1.ApprovalAutomatic)
			if err := c.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			if err := c.Client.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
			return s
		}
		local, remote, remoteLocal := subscription(x, "local"), subscription(y, "remote"), subscription(y, "other")
		plan := func() *v1alpha1.InstallPlan {
			return &v1alpha1.InstallPlan{
				ObjectMeta: metav1.ObjectMeta{Namespace: x, GenerateName: "install-",
					OwnerReferences: []metav1.OwnerReference{owners.SubscriptionOwnerRef(remote.Name, remote.UID)}},
				Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"local.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true},
			}
		}
		// The webhook adds the plan's own namespace's Subscription and keeps the given reference
		// as it is: no UID from another namespace is added or rewritten.
		ip := plan()
		if err := c.Client.Create(ctx, ip, client.DryRunAll); err != nil {
			t.Fatal(err)
		}
		want := []metav1.OwnerReference{owners.SubscriptionOwnerRef(remote.Name, remote.UID), owners.SubscriptionOwnerRef(local.Name, local.UID)}
		if !slices.EqualFunc(ip.OwnerReferences, want, func(a, b metav1.OwnerReference) bool { return a.Name == b.Name && a.UID == b.UID }) {
			t.Errorf("admitted owners %v, want %v", ip.OwnerReferences, want)
		}
		// A Subscription of namespace y whose status names x's plan: the controller must not make
		// it an owner of x's plan (a cross-namespace owner is garbage to the garbage collector).
		victim := plan()
		victim.OwnerReferences = nil
		if err := c.Client.Create(ctx, victim); err != nil {
			t.Fatal(err)
		}
		// A populated status, so the controller's repair considers the plan.
		victim.Status = v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseComplete, CatalogSources: []string{},
			Plan: []*v1alpha1.Step{{Resolving: "local.v1", Status: "Created", Resource: v1alpha1.StepResource{Kind: "ClusterServiceVersion", Name: "local.v1"}}}}
		if err := c.Client.Status().Update(ctx, victim); err != nil {
			t.Fatal(err)
		}
		for _, s := range []*v1alpha1.Subscription{remote, remoteLocal} {
			if err := pointAt(ctx, c.Client, s, victim); err != nil {
				t.Fatal(err)
			}
		}
		rv := victim.ResourceVersion
		// Both reconcilers that could write the plan have acted on y's Subscriptions: the F1
		// repair, and the drift reconciler, which reports them one window later (their plan is not
		// in their namespace) and would repair the plan then.
		installPlansReconciledUpTo(t, ctx, c, y)
		for _, s := range []*v1alpha1.Subscription{remote, remoteLocal} {
			testenv.Eventually(t, "drift of "+y+"/"+s.Name+" reported and nudged", func(ctx context.Context) (bool, error) {
				err := c.Client.Get(ctx, client.ObjectKeyFromObject(s), s)
				return s.Annotations[olmguard.ResyncAnnotation] != "", err
			})
		}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(victim), victim); err != nil {
			t.Fatal(err)
		}
		if victim.ResourceVersion != rv || slices.ContainsFunc(victim.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == remote.UID || r.UID == remoteLocal.UID }) {
			t.Errorf("x's plan was written (resourceVersion %s -> %s), owners %v", rv, victim.ResourceVersion, victim.OwnerReferences)
		}
	})

	t.Run("a Job that imitates an unpack Job outside a catalog namespace", func(t *testing.T) {
		ns := "hostile-jobs"
		if err := c.CreateNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		configMap := func(name string, owners ...metav1.OwnerReference) *corev1.ConfigMap {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
				Labels: map[string]string{olm.ManagedLabel: olm.ManagedLabelValue}, OwnerReferences: owners}}
			if err := c.Client.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			return cm
		}
		job := func(name string, cm *corev1.ConfigMap, labels map[string]string) *batchv1.Job {
			j := &batchv1.Job{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "extract", Image: "registry.k8s.io/pause:3.10"}}}}},
			}
			if err := c.Client.Create(ctx, j); err != nil {
				t.Fatal(err)
			}
			return j
		}
		// What the webhook renames in a catalog namespace: OLM's labels and a ConfigMap owner.
		bundle := configMap("bundle")
		visible := job("imitation", bundle, map[string]string{olm.ManagedLabel: olm.ManagedLabelValue, olm.BundleUnpackRefLabel: bundle.Name})
		if visible.Name != "imitation" || visible.Spec.TTLSecondsAfterFinished != nil {
			t.Errorf("look-alike Job admitted as %q with TTL %v, want its own name and no TTL", visible.Name, visible.Spec.TTLSecondsAfterFinished)
		}
		// What the controller labels or deletes: a Job OLM cannot see, owned by an OLM-labelled
		// ConfigMap that names a CatalogSource this namespace does not have.
		ghost := configMap("ghost-bundle", metav1.OwnerReference{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: "ghost", UID: "6f1c0c3e-0000-4000-8000-000000000000"})
		invisible := job("invisible", ghost, nil)
		// The Jobs finish (kwok completes their pods); the invisible one may go first with its
		// ghost-owned ConfigMap (the garbage collector).
		for _, j := range []*batchv1.Job{visible, invisible} {
			testenv.Eventually(t, "Job "+j.Name+" finished", func(ctx context.Context) (bool, error) {
				got := &batchv1.Job{}
				err := c.Client.Get(ctx, client.ObjectKeyFromObject(j), got)
				if apierrors.IsNotFound(err) {
					return j == invisible, nil
				}
				finished, _ := unpack.Finished(got)
				return finished, err
			})
		}
		unpackJobsReconciledUpTo(t, ctx, c)
		got := &batchv1.Job{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(visible), got); err != nil {
			t.Errorf("look-alike Job: %v, want it kept", err)
		}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(invisible), got); err == nil && len(got.Labels) != 0 {
			t.Errorf("look-alike invisible Job labelled %v", got.Labels) // NotFound: the garbage collector's (the ghost owner)
		}
		events := &corev1.EventList{}
		if err := c.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == "UnpackJobLabelled" || e.Reason == "UnpackJobDeleted" {
				t.Errorf("olmguard acted on a look-alike Job: %s %s", e.Reason, e.Message)
			}
		}
	})

	checkNoPermissionErrors(t, c, webhook, controller)
}

// installPlansReconciledUpTo is a barrier for the controller's InstallPlan repair: in namespace ns
// it creates a plan with its first status, then a Subscription naming it (the webhook, which owns
// a new plan by the Subscriptions that exist, cannot add it), and waits until the controller has
// made that Subscription an owner. The reconciler works through its queue in order, so by then it
// has reconciled every plan and Subscription written before. The plan is Complete, as the
// Subscription's conditions say: the drift reconciler, which repairs too, has nothing to do.
func installPlansReconciledUpTo(t *testing.T, ctx context.Context, c *cluster.Cluster, ns string) {
	t.Helper()
	ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "marker-"},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"marker.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true}}
	if err := c.Client.Create(ctx, ip); err != nil {
		t.Fatal(err)
	}
	ip.Status = populatedStatus("marker.v1")
	ip.Status.Phase = v1alpha1.InstallPlanPhaseComplete
	if err := c.Client.Status().Update(ctx, ip); err != nil {
		t.Fatal(err)
	}
	sub := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "marker-"},
		Spec: v1alpha1.SubscriptionSpec{CatalogSource: "none", CatalogSourceNamespace: ns, Package: "marker"}}
	if err := c.Client.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if err := pointAt(ctx, c.Client, sub, ip); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "marker plan "+ns+"/"+ip.Name+" repaired", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(ip), ip)
		return scenario.OwnedBy(ip, sub.UID), err
	})
}

// unpackJobsReconciledUpTo is a barrier for the controller's unpack Job reconciler: in a namespace
// of its own, with a CatalogSource, it creates a Job owned by the CatalogSource's unpack
// ConfigMap but without OLM's labels, which the controller labels (or deletes, once finished), and
// waits for the Event saying so. The reconciler works through its queue in order and Events go
// out in order, so by then it has reconciled every Job written or finished before, and their
// Events, if any, are there.
func unpackJobsReconciledUpTo(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	ns := c.FreshNamespace(ctx, t, "unpack-marker")
	cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marker"},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: "registry.example/marker:v1"}}
	if err := c.Client.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marker-bundle",
		Labels:          map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: cs.Name, UID: cs.UID}}}}
	if err := c.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "marker",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "extract", Image: "registry.k8s.io/pause:3.10"}}}}},
	}
	if err := c.Client.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "marker Job "+ns+"/"+j.Name+" repaired", func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := c.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return slices.ContainsFunc(events.Items, func(e corev1.Event) bool {
			return (e.Reason == "UnpackJobLabelled" || e.Reason == "UnpackJobDeleted") && e.Related != nil && e.Related.Name == j.Name
		}), nil
	})
}
