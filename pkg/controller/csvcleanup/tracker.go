package csvcleanup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/queueidle"
	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/write"
)

// trackPageSize bounds what one page of the tracker's list holds: the metadata of CSVs labelled
// olm.copiedFrom, whose annotations (alm-examples) are often 10 to 100 KB each.
const trackPageSize = 20

// Tracker labels olmguard.io/cleanup-tracked, once each time this replica leads, every CSV labelled
// olm.copiedFrom that holds olmguard's finalizer without that label: the cache leaves the others
// labelled olm.copiedFrom out (issue 32), and such a CSV, unseen, would stay terminating once
// deleted. The webhook labels them as they are written (cleanup.TrackPatch); this finds those
// written while it was away, or before olmguard cached CSVs this way.
type Tracker struct {
	// Cache and Idle are waited for (Idle at most queueidle.MaxWait), so that the pass does not
	// add its reads to the caches' first lists and the first reconcile pass: on a cluster of 2,000
	// namespaces it reads the metadata of 20,000 copies, 800 MB, a page at a time.
	Cache interface {
		WaitForCacheSync(context.Context) bool
	}
	Idle   func() bool
	Reader client.Reader // live: the cache holds none of these CSVs
	Client client.Writer
}

// TrackPass is what one pass of the tracker read and labelled.
type TrackPass struct{ Read, Labelled, Pages int }

// NeedLeaderElection makes the pass run on the leader only.
func (t *Tracker) NeedLeaderElection() bool { return true }

// Start runs the pass once the caches have synced; a failure is logged, not retried until the
// next leadership.
func (t *Tracker) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("cleanup-tracker")
	if t.Cache != nil && !t.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	if t.Idle != nil {
		queueidle.Wait(ctx, t.Idle, queueidle.Poll, queueidle.MaxWait)
	}
	if ctx.Err() != nil {
		return nil
	}
	start := time.Now()
	pass, err := TrackLabelledCSVs(ctx, t.Reader, t.Client)
	if err != nil && ctx.Err() != nil {
		return nil // stopped, or no longer the leader: the next leader runs the pass
	}
	if err != nil {
		log.Error(err, "labelling finalized CSVs labelled as copies", "read", pass.Read, "labelled", pass.Labelled)
		return nil
	}
	// Once per leadership: how long the pass took on this cluster, and what it found.
	log.Info("checked the CSVs labelled as copies for olmguard's finalizer", "read", pass.Read, "labelled", pass.Labelled,
		"label", olmguard.CleanupTrackedLabel, "pages", pass.Pages, "duration", time.Since(start).Round(time.Millisecond).String())
	return nil
}

// TrackLabelledCSVs reads the metadata of every CSV labelled olm.copiedFrom and not tracked, a page
// at a time, and labels those holding olmguard's finalizer (a patch that applies only to the CSV
// of the UID read). A CSV it could not label is in the error, and the pass goes on.
func TrackLabelledCSVs(ctx context.Context, r client.Reader, w client.Writer) (TrackPass, error) {
	var pass TrackPass
	var errs []error
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ClusterServiceVersionList"))
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: cacheneeds.UntrackedCopies}, client.Limit(trackPageSize)}
	for {
		if err := r.List(ctx, list, opts...); err != nil {
			return pass, fmt.Errorf("listing CSVs labelled %s: %w", olm.CopiedFromLabel, err)
		}
		pass.Pages++
		pass.Read += len(list.Items)
		for i := range list.Items {
			m := &list.Items[i]
			ops := cleanup.TrackPatch(m.Labels, cleanup.HasFinalizer(m.Finalizers))
			if len(ops) == 0 {
				continue
			}
			csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID}}
			ops = append([]jsonpatch.Operation{jsonpatch.NewOperation("test", "/metadata/uid", string(m.UID))}, ops...)
			done, err := write.JSONPatch(ctx, w, csv, ops)
			if err != nil {
				errs = append(errs, fmt.Errorf("labelling CSV %s/%s %s: %w", m.Namespace, m.Name, olmguard.CleanupTrackedLabel, err))
			}
			if done {
				pass.Labelled++
			}
		}
		if list.Continue == "" {
			return pass, errors.Join(errs...)
		}
		opts = append(opts[:2], client.Continue(list.Continue))
	}
}
