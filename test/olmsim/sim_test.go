package olmsim_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/testenv"
)

// An upgrade v1 -> v2 -> v3 as OLM does it: the new CSV's spec.replaces names the installed one,
// the old one goes Replacing, then Deleting, and the olm-operator deletes it.
func TestSimUpgradeChainDeletesReplacedCSVs(t *testing.T) {
	sim, ctx := newSim(t, olmsim.V0_46)
	cat := &olmsim.Catalog{Name: "up", Bundles: []olmsim.Bundle{
		{Package: "eps", Channel: "stable", CSVName: "eps.v1", Version: "1.0.0", Image: "registry.example/eps:v1"},
	}}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	ns := uniqueNS("upgrade")
	if _, err := sim.CreateOperatorGroup(ctx, ns, "og", ns); err != nil {
		t.Fatal(err)
	}
	sub, err := sim.CreateSubscription(ctx, ns, "eps", cat, "eps", v1alpha1.ApprovalAutomatic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Install(ctx, ns, false); err != nil {
		t.Fatal(err)
	}
	for i, next := range []string{"eps.v2", "eps.v3"} {
		prev := []string{"eps.v1", "eps.v2"}[i]
		cat.Bundles = append(cat.Bundles, olmsim.Bundle{Package: "eps", Channel: "stable", CSVName: next, Version: next[5:] + ".0.0",
			Replaces: prev, Image: "registry.example/eps:" + next[4:]})
		// Watch the old CSV's phases on the way out.
		phases := map[v1alpha1.ClusterServiceVersionPhase]bool{}
		stop := watchCSVPhases(t, ctx, sim, ns, prev, phases)
		if _, err := sim.Install(ctx, ns, false); err != nil {
			t.Fatal(err)
		}
		csv := &v1alpha1.ClusterServiceVersion{}
		if err := sim.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: next}, csv); err != nil {
			t.Fatal(err)
		}
		if csv.Spec.Replaces != prev || csv.Status.Phase != v1alpha1.CSVPhaseSucceeded {
			t.Fatalf("%s: replaces %q phase %q, want replaces %s and Succeeded", next, csv.Spec.Replaces, csv.Status.Phase, prev)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
			err := sim.Admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: prev}, &v1alpha1.ClusterServiceVersion{})
			return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		})
		stop()
		if err != nil {
			t.Fatalf("replaced CSV %s not deleted", prev)
		}
		if !phases[v1alpha1.CSVPhaseReplacing] || !phases[v1alpha1.CSVPhaseDeleting] {
			t.Errorf("%s went through %v, want Replacing and Deleting", prev, phases)
		}
	}
	fresh := &v1alpha1.Subscription{}
	if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.Status.InstalledCSV != "eps.v3" || fresh.Status.State != v1alpha1.SubscriptionStateAtLatest {
		t.Fatalf("Subscription status %+v, want AtLatestKnown at eps.v3", fresh.Status)
	}
}

// watchCSVPhases records the phases a CSV goes through until stop is called.
func watchCSVPhases(t *testing.T, ctx context.Context, sim *olmsim.Sim, ns, name string, into map[v1alpha1.ClusterServiceVersionPhase]bool) (stop func()) {
	t.Helper()
	w, err := sim.Client.(client.WithWatch).Watch(ctx, &v1alpha1.ClusterServiceVersionList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if csv, ok := ev.Object.(*v1alpha1.ClusterServiceVersion); ok && csv.Name == name {
				into[csv.Status.Phase] = true
			}
		}
	}()
	return func() { w.Stop(); <-done }
}

// The catalog-operator recreates a catalog's pod when it is deleted.
func TestSimRecreatesDeletedCatalogPod(t *testing.T) {
	sim, ctx := newSim(t, olmsim.V0_46)
	cat := &olmsim.Catalog{Name: "pods"}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	list := func() []corev1.Pod {
		pods := &corev1.PodList{}
		if err := sim.Admin.List(ctx, pods, client.InNamespace(cat.Namespace), client.MatchingLabels{olm.CatalogSourceLabel: cat.Name}); err != nil {
			t.Fatal(err)
		}
		return pods.Items
	}
	pods := list()
	if len(pods) != 1 {
		t.Fatalf("%d catalog pods, want 1", len(pods))
	}
	first := pods[0]
	if ref := first.OwnerReferences; len(ref) != 1 || ref[0].Kind != "CatalogSource" || !*ref[0].Controller || first.Labels[olm.ManagedLabel] != "true" {
		t.Fatalf("catalog pod metadata %+v, want a controller reference to the CatalogSource and olm.managed", first.ObjectMeta)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go sim.RunCatalogOperator(runCtx, time.Second)
	if err := sim.Admin.Delete(ctx, &first, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(context.Context) (bool, error) {
		for _, p := range list() {
			if p.UID != first.UID && p.DeletionTimestamp == nil {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatal("no new catalog pod after the old one was deleted")
	}
}

// A plan's CRD steps do what OLM's catalog-operator does to a CRD: create it labelled olm.managed
// and annotated operatorframework.io/installed-alongside-<hash>: <namespace>/<CSV>, marking the step
// Created; for a CRD that exists, add that annotation and mark the step Present. olmguard's
// operand cleanup reads both as OLM's evidence (docs/cleanup.md).
func TestSimCRDStepsAsOLM(t *testing.T) {
	sim, ctx := newSim(t, olmsim.V0_46)
	const crdName = "gizmos.olmsim.example.com"
	cat := &olmsim.Catalog{Name: "gizmos", Bundles: []olmsim.Bundle{{Package: "gizmo", Channel: "stable", CSVName: "gizmo.v1", Version: "1.0.0",
		Image: "registry.example/gizmo:v1", OwnedCRDs: []v1alpha1.CRDDescription{{Name: crdName, Version: "v1", Kind: "Gizmo"}}}}}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	wantStatus := map[int]string{0: "Created", 1: "Present"}
	var namespaces []string
	for i := range 2 {
		ns := uniqueNS("gizmo")
		namespaces = append(namespaces, ns)
		if _, err := sim.CreateOperatorGroup(ctx, ns, "og", ns); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.CreateSubscription(ctx, ns, "gizmo", cat, "gizmo", v1alpha1.ApprovalAutomatic); err != nil {
			t.Fatal(err)
		}
		ip, err := sim.Install(ctx, ns, false)
		if err != nil || ip == nil {
			t.Fatalf("install %d: plan %v, err %v", i, ip, err)
		}
		plan := &v1alpha1.InstallPlan{}
		if err := sim.Admin.Get(ctx, client.ObjectKeyFromObject(ip), plan); err != nil {
			t.Fatal(err)
		}
		found := false
		for _, st := range plan.Status.Plan {
			if st.Resource.Kind == "CustomResourceDefinition" && st.Resource.Name == crdName {
				found = true
				if st.Resolving != "gizmo.v1" || st.Status != wantStatus[i] {
					t.Errorf("install %d: CRD step resolving %q status %q, want gizmo.v1 and %s", i, st.Resolving, st.Status, wantStatus[i])
				}
			}
		}
		if !found {
			t.Errorf("install %d: no CRD step in %+v", i, plan.Status.Plan)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := sim.Admin.Get(ctx, types.NamespacedName{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	values := map[string]bool{}
	for k, v := range crd.Annotations {
		if strings.HasPrefix(k, "operatorframework.io/installed-alongside-") {
			values[v] = true
		}
	}
	for _, ns := range namespaces {
		if !values[ns+"/gizmo.v1"] {
			t.Errorf("CRD annotations %v: none names %s/gizmo.v1", crd.Annotations, ns)
		}
	}
	if crd.Labels[olm.ManagedLabel] != olm.ManagedLabelValue {
		t.Errorf("CRD labels %v, want olm.managed=true", crd.Labels)
	}
}
