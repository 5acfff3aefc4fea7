package csvcleanup_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// sharedBundledRole runs issue 31's item 2 through the csv-cleanup reconciler and
// the orphan sweep: team-a runs v1.0.0 of a package in its namespace; team-b installs v2.0.0 in
// another, and OLM relabels the bundled ClusterRole olm.owner=<team-b's CSV> (OLM issue #2985);
// team-b uninstalls: the role stays for team-a; team-a uninstalls later: the sweep deletes it.
// The second case ties the CSVs by OLM's olm.package property only (names without ".v").
//
// Fails before the fix: team-b's cleanup deleted the role through the name-only path of
// cleanup.Owned (no other CSV had team-b's CSV name), while team-a's CSV still ran.
//
// It runs inside TestDeletePath, whose controller is running (one per test binary).
func sharedBundledRole(t *testing.T, c client.Client) {
	ctx := context.Background()
	sweeper := &csvcleanup.Sweeper{Client: c, Reader: c, Recorder: events.NewFakeRecorder(10)}

	for _, tc := range []struct{ name, pkg, v1, v2 string }{
		{"name rule", "sharedpkg", "sharedpkg.v1.0.0", "sharedpkg.v2.0.0"},
		{"olm.package property", "sharedprop", "sharedprop-1.0.0", "sharedprop-2.0.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			teamA := createPackageCSV(t, c, namespace(t, c, "team-a"), tc.v1, tc.pkg)
			teamB := createPackageCSV(t, c, namespace(t, c, "team-b"), tc.v2, tc.pkg)
			role := createClusterRole(t, c, tc.pkg+"-reader", map[string]string{olm.OwnerLabel: teamB.Name, olm.ManagedLabel: olm.ManagedLabelValue})

			if err := c.Delete(ctx, teamB); err != nil {
				t.Fatal(err)
			}
			waitGone(t, c, teamB, "team-b's CSV")
			mustExist(t, c, role, "the bundled ClusterRole team-a's CSV still uses, after team-b's uninstall")
			for range 2 {
				if err := sweeper.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
			}
			mustExist(t, c, role, "the bundled ClusterRole team-a's CSV still uses, after two sweeps")

			if err := c.Delete(ctx, teamA); err != nil {
				t.Fatal(err)
			}
			waitGone(t, c, teamA, "team-a's CSV")
			for range 2 {
				if err := sweeper.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
			}
			waitGone(t, c, role, "the bundled ClusterRole once no CSV of the package is left")
		})
	}
}

// createPackageCSV writes a CSV of package pkg with OLM's properties annotation, as the
// catalog-operator creates it from a bundle, and olmguard's finalizer.
func createPackageCSV(t *testing.T, c client.Client, ns, name, pkg string) *v1alpha1.ClusterServiceVersion {
	t.Helper()
	csv := &v1alpha1.ClusterServiceVersion{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Finalizers: []string{olmguard.CleanupFinalizer},
			Annotations: map[string]string{cleanup.PropertiesAnnotation: `{"properties":[{"type":"olm.package","value":{"packageName":"` + pkg + `","version":"1.0.0"}}]}`}},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}},
	}
	if err := c.Create(context.Background(), csv); err != nil {
		t.Fatal(err)
	}
	return csv
}
