package installplans_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/installplans"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

var env *testenv.Env

// TestMain runs one control plane and a controller manager with only this reconciler.
func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func() error, error) {
		env = e
		return testenv.RunManager(e.Config, testenv.ManagerOptions(), setup.Controller{}.Reconciler(installplans.Name))
	})
}

func requireEnv(t *testing.T) { env = testenv.Shared(t) }

func hasOwner(ip *v1alpha1.InstallPlan, uid types.UID) bool {
	for _, r := range ip.OwnerReferences {
		if r.UID == uid {
			return true
		}
	}
	return false
}

// The #3199 interleaving with no webhook: the controller adds the missing owner, appending.
func TestRepairsPlanMissingOwner(t *testing.T) {
	requireEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.Patience)
	defer cancel()
	sim, err := olmsim.Start(ctx, env.Config, env.Scheme, olmsim.Options{CompleteJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	cat := scenario.F1Catalog()
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	r, err := scenario.Replay3199(ctx, sim, cat, "f1-repair")
	if err != nil {
		t.Fatal(err)
	}
	ip, a, b := r.Plan, r.Manual, r.Auto
	var got v1alpha1.InstallPlan
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ip), &got); err != nil {
			return false, err
		}
		return hasOwner(&got, b.UID), nil
	})
	if err != nil {
		t.Fatalf("plan %s never got Subscription beta as owner: %v", ip.Name, got.OwnerReferences)
	}
	if !hasOwner(&got, a.UID) || got.OwnerReferences[0].UID != a.UID {
		t.Fatalf("OLM's reference must stay first and unchanged: %+v", got.OwnerReferences)
	}
	want := owners.SubscriptionOwnerRef("beta", b.UID)
	last := got.OwnerReferences[len(got.OwnerReferences)-1]
	if last.APIVersion != want.APIVersion || last.Kind != want.Kind || *last.Controller || *last.BlockOwnerDeletion {
		t.Fatalf("added reference %+v, want %+v", last, want)
	}
}

// A plan whose first status is not written yet is left alone, even when a Subscription names it.
func TestNoPatchBeforeFirstStatus(t *testing.T) {
	requireEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.Patience)
	defer cancel()
	ns := "f1-wait"
	sim, err := olmsim.New(env.Config, env.Scheme, olmsim.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sim.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	ip := createPlan(t, ctx, ns, "install-", "x")
	sub := createSubscriptionOf(t, ctx, ip, metav1.ObjectMeta{Name: "x", Namespace: ns}, "x")
	rv := ip.ResourceVersion
	reconciledUpTo(t, ctx, ns)
	fresh := &v1alpha1.InstallPlan{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(ip), fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.ResourceVersion != rv {
		t.Fatalf("plan written before its first status (owners %v): OLM's UpdateStatus would conflict", fresh.OwnerReferences)
	}
	// OLM's first status write, on the object Create returned, must succeed; then the repair comes.
	ip.Status = installingStatus("x.v1")
	if err := env.Client.Status().Update(ctx, ip); err != nil {
		t.Fatalf("OLM's first status write failed: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		return hasOwner(fresh, sub.UID), env.Client.Get(ctx, client.ObjectKeyFromObject(ip), fresh)
	})
	if err != nil {
		t.Fatalf("plan not repaired after its status was written: %v", fresh.OwnerReferences)
	}
}

// reconciledUpTo is a barrier: it writes, in namespace ns, a plan with its first status and then a
// Subscription naming it, and waits until the reconciler has repaired that plan. The reconciler
// works through its queue in order, so every request queued before the Subscription's event, the
// events of the objects written before included, has been reconciled by then.
func reconciledUpTo(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	ip := createPlan(t, ctx, ns, "marker-", "marker")
	ip.Status = installingStatus("marker.v1")
	if err := env.Client.Status().Update(ctx, ip); err != nil {
		t.Fatal(err)
	}
	sub := createSubscriptionOf(t, ctx, ip, metav1.ObjectMeta{GenerateName: "marker-", Namespace: ns}, "marker")
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		return hasOwner(ip, sub.UID), env.Client.Get(ctx, client.ObjectKeyFromObject(ip), ip)
	})
	if err != nil {
		t.Fatalf("marker plan %s/%s not repaired: %v", ns, ip.Name, err)
	}
}

// createPlan creates a plan for package pkg's CSV <pkg>.v1 as OLM's Create does: no status yet.
func createPlan(t *testing.T, ctx context.Context, ns, generateName, pkg string) *v1alpha1.InstallPlan {
	t.Helper()
	ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{GenerateName: generateName, Namespace: ns},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{pkg + ".v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true, Generation: 1}}
	if err := env.Client.Create(ctx, ip); err != nil {
		t.Fatal(err)
	}
	return ip
}

// installingStatus is OLM's first status write of a plan installing csv.
func installingStatus(csv string) v1alpha1.InstallPlanStatus {
	return v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseInstalling, CatalogSources: []string{"c"},
		Plan: []*v1alpha1.Step{{Resolving: csv, Status: "Unknown", Resource: v1alpha1.StepResource{Kind: "ClusterServiceVersion", Name: csv}}}}
}

// createSubscriptionOf creates a Subscription to pkg whose status names ip, as OLM's
// setIPReference leaves it, without being one of ip's owners.
func createSubscriptionOf(t *testing.T, ctx context.Context, ip *v1alpha1.InstallPlan, meta metav1.ObjectMeta, pkg string) *v1alpha1.Subscription {
	t.Helper()
	sub := &v1alpha1.Subscription{ObjectMeta: meta, Spec: v1alpha1.SubscriptionSpec{CatalogSource: "c", CatalogSourceNamespace: "olm", Package: pkg}}
	if err := env.Client.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	sub.Status.InstallPlanRef = &corev1.ObjectReference{Kind: "InstallPlan", Name: ip.Name, Namespace: ip.Namespace, UID: ip.UID}
	sub.Status.LastUpdated = metav1.Now()
	if err := env.Client.Status().Update(ctx, sub); err != nil {
		t.Fatal(err)
	}
	return sub
}
