package olmsim_test

// Baselines: with olmguard absent, the simulator reproduces the failures olmguard fixes.

import (
	"context"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
)

func ownerUIDs(ip *v1alpha1.InstallPlan) map[types.UID]bool {
	out := map[types.UID]bool{}
	for _, r := range ip.OwnerReferences {
		if r.Kind == olm.SubscriptionKind {
			out[r.UID] = true
		}
	}
	return out
}

// F1 (OLM issue #3199): a Subscription created between the namespace sync's first List and the
// resolver's second one gets status.installPlanRef to a plan that has no ownerReference to it.
func TestBaselineF1PlanLacksOwnerOfInterleavedSubscription(t *testing.T) {
	sim, ctx := newSim(t, olmsim.V0_46)
	cat := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	r, err := scenario.Replay3199(ctx, sim, cat, uniqueNS("f1"))
	if err != nil {
		t.Fatal(err)
	}
	fresh := &v1alpha1.Subscription{}
	if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(r.Auto), fresh); err != nil {
		t.Fatal(err)
	}
	if ref := fresh.Status.InstallPlanRef; ref == nil || ref.Name != r.Plan.Name {
		t.Fatalf("Subscription beta installPlanRef = %v, want %s", ref, r.Plan.Name)
	}
	if !scenario.OwnedBy(r.Plan, r.Manual.UID) || scenario.OwnedBy(r.Plan, r.Auto.UID) {
		t.Fatalf("plan %s owners = %v; want alpha (%s) only: the #3199 failure", r.Plan.Name, r.Plan.OwnerReferences, r.Manual.UID)
	}
	if r.Plan.Spec.Approval != v1alpha1.ApprovalManual {
		t.Errorf("plan approval = %s, want Manual (one Manual Subscription makes every plan Manual)", r.Plan.Spec.Approval)
	}
}

// Without the interleaving, OLM owns a new plan by every Subscription of the namespace.
func TestSimPlanOwnedByEverySubscription(t *testing.T) {
	sim, ctx := newSim(t, olmsim.V0_46)
	cat := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	ns := uniqueNS("f1ok")
	if _, err := sim.CreateOperatorGroup(ctx, ns, "og"); err != nil {
		t.Fatal(err)
	}
	a, err := sim.CreateSubscription(ctx, ns, "alpha", cat, "alpha", v1alpha1.ApprovalAutomatic)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sim.CreateSubscription(ctx, ns, "beta", cat, "beta", v1alpha1.ApprovalAutomatic)
	if err != nil {
		t.Fatal(err)
	}
	ip, err := sim.Install(ctx, ns, false)
	if err != nil {
		t.Fatal(err)
	}
	if owners := ownerUIDs(ip); !owners[a.UID] || !owners[b.UID] {
		t.Fatalf("plan owners = %v, want both Subscriptions", ip.OwnerReferences)
	}
	for _, r := range ip.OwnerReferences {
		if *r.Controller || *r.BlockOwnerDeletion || r.APIVersion != olm.V1alpha1APIVersion {
			t.Errorf("ownerReference %+v: want controller=false, blockOwnerDeletion=false, %s", r, olm.V1alpha1APIVersion)
		}
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := sim.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "beta.v1.0.0"}, csv); err != nil {
		t.Fatalf("CSV not installed: %v", err)
	}
	if csv.Status.Phase != v1alpha1.CSVPhaseSucceeded || !hasFinalizer(csv, olm.CSVCleanupFinalizer) {
		t.Errorf("CSV phase %q finalizers %v; want Succeeded with OLM's finalizer", csv.Status.Phase, csv.Finalizers)
	}
}

func hasFinalizer(o client.Object, f string) bool {
	for _, x := range o.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

func countLeftovers(t *testing.T, ctx context.Context, sim *olmsim.Sim, cat *olmsim.Catalog, ns string) scenario.Leftovers {
	t.Helper()
	l, err := scenario.CountLeftovers(ctx, sim.Admin, cat, ns)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// F3: uninstalling leaves cluster-scoped objects behind. Before v0.27 everything labelled stays
// when OLM misses the deletion; with OLM's finalizer the bundled ClusterRole (OLM issue #2985) and
// the kube-system auth-reader RoleBinding still stay.
func TestBaselineF3UninstallLeavesClusterObjects(t *testing.T) {
	for _, tc := range []struct {
		version olmsim.Version
		want    scenario.Leftovers
	}{
		{olmsim.V0_26, scenario.Leftovers{Labelled: 3, Bundled: 1, AuthReader: 1, Webhooks: 1}},
		{olmsim.V0_46, scenario.Leftovers{Labelled: 0, Bundled: 1, AuthReader: 1, Webhooks: 0}},
	} {
		t.Run(tc.version.String(), func(t *testing.T) {
			sim, ctx := newSim(t, tc.version)
			cat := scenario.GammaCatalog(uniqueNS("cat"))
			ns := uniqueNS("f3")
			sub, err := scenario.InstallGamma(ctx, sim, cat, ns)
			if err != nil {
				t.Fatal(err)
			}
			before := countLeftovers(t, ctx, sim, cat, ns)
			if before != (scenario.Leftovers{Labelled: 3, Bundled: 1, AuthReader: 1, Webhooks: 1}) {
				t.Fatalf("installed objects = %+v, want 2 ClusterRoles + 1 binding labelled, bundled role, auth reader, webhook", before)
			}
			// The user uninstalls: Subscription, then CSV.
			csv := &v1alpha1.ClusterServiceVersion{}
			if err := sim.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: "gamma.v1.0.0"}, csv); err != nil {
				t.Fatal(err)
			}
			if err := sim.Admin.Delete(ctx, sub); err != nil {
				t.Fatal(err)
			}
			if err := sim.Admin.Delete(ctx, csv); err != nil {
				t.Fatal(err)
			}
			if tc.version.AtLeast(olmsim.V0_27) {
				// OLM is running: its finalizer does what it does.
				if err := sim.SyncCSVs(ctx, ns); err != nil {
					t.Fatal(err)
				}
			}
			if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(csv), csv); !apierrors.IsNotFound(err) {
				t.Fatalf("CSV still present after uninstall (err=%v, finalizers=%v)", err, csv.Finalizers)
			}
			if got := countLeftovers(t, ctx, sim, cat, ns); got != tc.want {
				t.Fatalf("after uninstall: %+v, want %+v", got, tc.want)
			}
		})
	}
}

// With OLM's finalizer (v0.27+) and OLM not running, a deleted CSV stays Terminating.
func TestSimCSVStaysTerminatingWithoutOLM(t *testing.T) {
	sim, ctx := newSim(t, olmsim.V0_46)
	cat := scenario.GammaCatalog(uniqueNS("cat"))
	ns := uniqueNS("f3t")
	if _, err := scenario.InstallGamma(ctx, sim, cat, ns); err != nil {
		t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	key := types.NamespacedName{Namespace: ns, Name: "gamma.v1.0.0"}
	if err := sim.Admin.Get(ctx, key, csv); err != nil {
		t.Fatal(err)
	}
	if err := sim.Admin.Delete(ctx, csv); err != nil {
		t.Fatal(err)
	}
	if err := sim.Admin.Get(ctx, key, csv); err != nil || csv.DeletionTimestamp == nil {
		t.Fatalf("want CSV terminating, got err=%v deletionTimestamp=%v", err, csv.DeletionTimestamp)
	}
}

// F4 (OLM issue #3210): a finished unpack Job written by OLM <= v0.25 (no labels) blocks
// v0.26-v0.28, which look Jobs up by label only: every sync fails with AlreadyExists and no plan
// is made. v0.29 finds the Job by name as well.
func TestBaselineF4UnlabelledJobBlocksUnpack(t *testing.T) {
	for _, tc := range []struct {
		version olmsim.Version
		stuck   bool
	}{
		{olmsim.V0_26, true},
		{olmsim.V0_28, true},
		{olmsim.V0_29, false},
	} {
		t.Run(tc.version.String(), func(t *testing.T) {
			old, ctx := newSim(t, olmsim.V0_25)
			cat := &olmsim.Catalog{Name: "f4", Bundles: []olmsim.Bundle{{Package: "delta", Channel: "stable", CSVName: "delta.v1.0.0",
				Version: "1.0.0", Image: "registry.example/delta-bundle:" + uniqueNS("v1")}}}
			if err := old.AddCatalog(ctx, cat); err != nil {
				t.Fatal(err)
			}
			first := uniqueNS("f4a")
			if err := old.EnsureNamespace(ctx, first); err != nil {
				t.Fatal(err)
			}
			if _, err := old.CreateSubscription(ctx, first, "delta", cat, "delta", v1alpha1.ApprovalAutomatic); err != nil {
				t.Fatal(err)
			}
			if _, err := old.Install(ctx, first, false); err != nil {
				t.Fatal(err)
			}
			job := &batchv1.Job{}
			name := olm.UnpackName(cat.Bundles[0].Image)
			if err := old.Admin.Get(ctx, types.NamespacedName{Namespace: old.CatalogNamespace, Name: name}, job); err != nil {
				t.Fatalf("old OLM left no unpack Job %s: %v", name, err)
			}
			if _, ok := job.Labels[olm.BundleUnpackRefLabel]; ok || job.Labels[olm.ManagedLabel] != "" {
				t.Fatalf("an OLM <= v0.25 Job carries no OLM labels, got %v", job.Labels)
			}
			// OLM is upgraded; later the same bundle is installed into a second namespace.
			sim := old.WithVersion(tc.version)
			second := uniqueNS("f4b")
			if err := sim.EnsureNamespace(ctx, second); err != nil {
				t.Fatal(err)
			}
			sub, err := sim.CreateSubscription(ctx, second, "delta", cat, "delta", v1alpha1.ApprovalAutomatic)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				_, err = sim.SyncNamespace(ctx, second)
				if err == nil || !tc.stuck {
					break
				}
			}
			if !tc.stuck {
				if _, err := sim.Install(ctx, second, false); err != nil {
					t.Fatalf("%s should find the old Job by name and install: %v", tc.version, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "already exists") {
				t.Fatalf("sync error = %v, want jobs.batch %q already exists", err, name)
			}
			fresh := &v1alpha1.Subscription{}
			if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
				t.Fatal(err)
			}
			c := fresh.Status.GetCondition(v1alpha1.SubscriptionBundleUnpackFailed)
			if c == nil || c.Reason != v1alpha1.ReasonErrorPreventedUnpacking || fresh.Status.InstallPlanRef != nil {
				t.Fatalf("Subscription status = %+v, want stuck with BundleUnpackFailed/ErrorPreventedUnpacking and no plan", fresh.Status)
			}
		})
	}
}
