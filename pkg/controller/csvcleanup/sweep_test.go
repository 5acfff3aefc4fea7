package csvcleanup_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestSweeperDeletesOrphanedBundledRBAC: a bundled ClusterRole and ClusterRoleBinding whose CSV
// exists nowhere (what an InstallPlan still executing after an uninstall leaves) are deleted by the
// second sweep that finds them, never the first; one whose CSV or another version of it exists,
// and one OLM labelled with all three owner labels, stay.
func TestSweeperDeletesOrphanedBundledRBAC(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx := context.Background()
	ns := namespace(t, c, "sweep")
	live := createCSV(t, c, ns, "sweep-live.v1", "", false)
	bundled := func(csv string) map[string]string {
		return map[string]string{olm.OwnerLabel: csv, olm.ManagedLabel: olm.ManagedLabelValue}
	}
	orphanRole := createClusterRole(t, c, "sweep-orphan", bundled("sweep-gone.v2"))
	orphanBinding := createClusterRoleBinding(t, c, "sweep-orphan", bundled("sweep-gone.v2"))
	kept := []client.Object{
		createClusterRole(t, c, "sweep-live", bundled(live.Name)),
		createClusterRole(t, c, "sweep-live-next", bundled("sweep-live.v2")), // its package still runs
		createClusterRole(t, c, "sweep-full-labels", olm.OwnerLabels("sweep-gone.v2", ns)),
	}
	reads := &liveCSVReads{Reader: c}
	s := &csvcleanup.Sweeper{Client: c, Reader: reads, Recorder: events.NewFakeRecorder(10)}

	exists := func(o client.Object) bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	// CSVs come from the controller's cache (Client): a live list would read every CSV's
	// annotations once a minute, 800 MB at 20,000 copies with a 40 KB alm-examples.
	if reads.csvLists > 0 {
		t.Errorf("the sweep listed CSVs live %d times", reads.csvLists)
	}
	if !exists(orphanRole) || !exists(orphanBinding) {
		t.Fatal("the first sweep that found the orphans deleted them; only a second may")
	}
	if err := s.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{orphanRole, orphanBinding} {
		if exists(o) {
			t.Errorf("%T %s, bundled by a CSV that exists nowhere, survived two sweeps", o, o.GetName())
		}
	}
	for _, o := range kept {
		if !exists(o) {
			t.Errorf("ClusterRole %s was deleted though it is not orphaned", o.GetName())
		}
	}
}

// liveCSVReads counts the CSV lists a Reader serves.
type liveCSVReads struct {
	client.Reader
	csvLists int
}

func (r *liveCSVReads) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if gvk := l.GetObjectKind().GroupVersionKind(); gvk.Kind == olm.ClusterServiceVersionKind+"List" {
		r.csvLists++
	}
	if _, ok := l.(*v1alpha1.ClusterServiceVersionList); ok {
		r.csvLists++
	}
	return r.Reader.List(ctx, l, opts...)
}
