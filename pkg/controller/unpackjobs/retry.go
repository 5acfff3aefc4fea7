package unpackjobs

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/pkg/write"
)

// EventUnpackRetried is the reason of the Event on each Subscription waiting on a bundle whose
// failed unpack Job was removed (on the CatalogSource when none is).
const EventUnpackRetried = "UnpackJobRetried"

// retryFailed removes a failed unpack Job, and its ConfigMap when it holds no bundle, as
// unpack.DecideRetry says, so that OLM before v0.43 unpacks the bundle again (OLM issue #2265:
// it keeps finding the Failed Job). It then nudges the Subscriptions waiting on the catalog: OLM
// sets BundleUnpackFailed and waits for its periodic resync, and a Job deleted in the catalog
// namespace requeues no Subscription's namespace.
func (r *Reconciler) retryFailed(ctx context.Context, job *batchv1.Job, cm *corev1.ConfigMap, catalog metav1.OwnerReference) (reconcile.Result, error) {
	others, err := r.otherUnpackJobs(ctx, job)
	if err != nil {
		return reconcile.Result{}, err
	}
	waiting, err := r.waitingSubscriptions(ctx, job.Namespace, catalog.Name)
	if err != nil {
		return reconcile.Result{}, err
	}
	olmRetries, err := r.olmRetries(ctx, waiting)
	if err != nil {
		return reconcile.Result{}, err
	}
	d := unpack.DecideRetry(unpack.FailedUnpack{Job: job, Others: others, ConfigMap: cm, OLMRetries: olmRetries}, r.Now(), r.RetryFailedAfter)
	log := ctrl.LoggerFrom(ctx)
	if !d.Retry {
		log.V(1).Info("failed unpack Job left", "reason", d.Reason)
		return reconcile.Result{RequeueAfter: d.RequeueAfter}, nil
	}
	// Preconditions: a Job or ConfigMap changed since it was read (recreated, or written by an
	// unpack) is left for the next reconcile.
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	deleted, err := write.DeleteUnchanged(ctx, r.Client, job, background)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("deleting failed unpack Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	if !deleted {
		return reconcile.Result{}, nil
	}
	what := "failed bundle unpack Job " + job.Namespace + "/" + job.Name
	if d.DeleteConfigMap {
		deleted, err := write.DeleteUnchanged(ctx, r.Client, cm, background)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("deleting unpack ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		if deleted {
			what += " and its empty ConfigMap " + cm.Name
		}
	}
	cond, _ := unpack.Failed(job)
	metrics.UnpackFailedJobsRemoved.WithLabelValues(cond.Reason).Inc()
	log.Info("removed failed unpack Job so that OLM unpacks again", "reason", cond.Reason, "configMapDeleted", d.DeleteConfigMap)
	// The Job's condition message is quoted: escaped, as everything written by others that an
	// Event carries to `kubectl describe`.
	note := printable.Line(fmt.Sprintf("olmguard removed the %s (%s: %s) so that OLM unpacks the bundle again (OLM issue #2265)", what, cond.Reason, cond.Message))
	if len(waiting) == 0 {
		cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: catalog.Name, UID: catalog.UID}}
		r.Recorder.Eventf(cs, job, corev1.EventTypeNormal, EventUnpackRetried, "RemoveFailedUnpackJob", "%s", note)
	}
	for _, s := range waiting {
		r.Recorder.Eventf(s, job, corev1.EventTypeNormal, EventUnpackRetried, "RemoveFailedUnpackJob", "%s", note)
	}
	return reconcile.Result{}, r.nudge(ctx, waiting)
}

// otherUnpackJobs lists, live, the other Jobs OLM finds for the same ConfigMap.
func (r *Reconciler) otherUnpackJobs(ctx context.Context, job *batchv1.Job) ([]batchv1.Job, error) {
	list := &batchv1.JobList{}
	if err := r.Reader.List(ctx, list, client.InNamespace(job.Namespace), client.MatchingLabels{olm.BundleUnpackRefLabel: job.Labels[olm.BundleUnpackRefLabel]}); err != nil {
		return nil, fmt.Errorf("listing unpack Jobs: %w", err)
	}
	var out []batchv1.Job
	for _, j := range list.Items {
		if j.UID != job.UID && j.DeletionTimestamp == nil {
			out = append(out, j)
		}
	}
	return out, nil
}

// olmRetries reports whether the OperatorGroup of any waiting Subscription's namespace turns on
// OLM's own unpack retries (v0.26+): then removing the Job would cut the user's retry interval.
func (r *Reconciler) olmRetries(ctx context.Context, waiting []*v1alpha1.Subscription) (bool, error) {
	seen := map[string]bool{}
	for _, s := range waiting {
		if seen[s.Namespace] {
			continue
		}
		seen[s.Namespace] = true
		ogs := &olmv1.OperatorGroupList{}
		if err := r.Reader.List(ctx, ogs, client.InNamespace(s.Namespace)); err != nil {
			return false, fmt.Errorf("listing OperatorGroups in %s: %w", s.Namespace, err)
		}
		for _, og := range ogs.Items {
			if unpack.OLMRetryInterval(og.Annotations) {
				return true, nil
			}
		}
	}
	return false, nil
}
