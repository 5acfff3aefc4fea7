package csvcleanup

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/write"
)

// rbacKinds are the kinds a bundle may ship cluster-wide that OLM labels olm.owner only.
var rbacKinds = []schema.GroupVersionKind{rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"), rbacv1.SchemeGroupVersion.WithKind("ClusterRole")}

// Sweeper deletes bundled ClusterRoles and ClusterRoleBindings whose operator exists nowhere
// (cleanup.OrphanedRBAC). No CSV deletion runs a cleanup for them: an InstallPlan still executing
// after its operator was uninstalled creates them after the last CSV of that name is gone. An
// object is deleted only when two sweeps in a row found it orphaned, so a plan that creates the
// RBAC a moment before its CSV is never raced. It runs on the leader only.
type Sweeper struct {
	Client   client.Client
	Reader   client.Reader
	Recorder events.EventRecorder
	Interval time.Duration

	suspects map[types.UID]bool // orphaned at the last sweep
}

// NeedLeaderElection makes the sweep run on one replica only.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps every Interval until ctx is done. A failed sweep is logged and retried at the next.
func (s *Sweeper) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("orphan-rbac-sweep")
	t := time.NewTicker(s.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.Sweep(ctx); err != nil {
				log.Error(err, "sweeping orphaned bundled RBAC")
			}
		}
	}
}

// Sweep is one pass: it deletes what the previous pass found orphaned and still is, and remembers
// what is orphaned now.
func (s *Sweeper) Sweep(ctx context.Context) error {
	// From the controller's cache, read only (no copies made): every CSV is there, trimmed to
	// what CSVRefOf reads, OLM's copies as stubs with their status reason. A live list would read
	// every CSV's annotations once a minute: 800 MB on a cluster of 20,000 copies with a 40 KB
	// alm-examples (docs/performance.md, "A cluster of 2,000 namespaces"). The cleanup reads the
	// same cache by the same rule, so both judge a shared object alike.
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if err := s.Client.List(ctx, csvs, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing CSVs: %w", err)
	}
	refs := make([]cleanup.CSVRef, 0, len(csvs.Items))
	for i := range csvs.Items {
		c := &csvs.Items[i]
		refs = append(refs, cleanup.CSVRefOf(c.Namespace, c.Name, c.Labels, c.Annotations, string(c.Status.Reason), c.DeletionTimestamp != nil, nil))
	}
	users := cleanup.NewUsers(refs)
	now := map[types.UID]bool{}
	for _, gvk := range rbacKinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := s.Reader.List(ctx, list, client.HasLabels{olm.OwnerLabel}); err != nil {
			return fmt.Errorf("listing %s: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if !cleanup.OrphanedRBAC(cleanup.Object{Kind: gvk.Kind, Name: o.Name, UID: o.UID, Labels: o.Labels}, users) {
				continue
			}
			if !s.suspects[o.UID] {
				now[o.UID] = true
				ctrl.LoggerFrom(ctx).V(1).Info("orphaned bundled RBAC: deleted at the next sweep if still orphaned", "kind", gvk.Kind, "name", o.Name, "csv", o.Labels[olm.OwnerLabel])
				continue
			}
			o.SetGroupVersionKind(gvk)
			deleted, err := write.DeleteExact(ctx, s.Client, o)
			if err != nil {
				return fmt.Errorf("deleting %s %s: %w", gvk.Kind, o.Name, err)
			}
			if !deleted {
				continue // gone already, or replaced by an object of the same name
			}
			metrics.CleanupDeletions.WithLabelValues("orphan").Inc()
			ctrl.LoggerFrom(ctx).Info("deleted orphaned bundled RBAC", "kind", gvk.Kind, "name", o.Name, "csv", o.Labels[olm.OwnerLabel])
			s.Recorder.Eventf(o, nil, corev1.EventTypeNormal, "OrphanDeleted", "Delete",
				"deleted %s %s: bundled by %s, which no longer exists in any namespace (OLM issue #2985)", gvk.Kind, o.Name, o.Labels[olm.OwnerLabel])
		}
	}
	s.suspects = now
	return nil
}
