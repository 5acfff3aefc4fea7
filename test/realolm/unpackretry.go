package realolm

import (
	"context"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

// UnpackFailure is OLM #2265 as OLM v0.28 (OLMAfter) leaves it on a cluster of its own: a bundle
// unpack Job Failed with DeadlineExceeded (a ResourceQuota in the catalog namespace let no unpack
// pod start, as an image that is never pulled does; the OperatorGroup set a 60 s unpack timeout),
// the Subscription BundleUnpackFailed, and the cause (the quota) gone again.
type UnpackFailure struct {
	C         *cluster.Cluster
	OLM       *cluster.OLM
	Namespace string
	Sub       *v1alpha1.Subscription
	Job       *batchv1.Job      // the Failed unpack Job
	ConfigMap *corev1.ConfigMap // its ConfigMap, empty
}

// CSV is the CSV the Subscription installs once the bundle unpacks.
func (u *UnpackFailure) CSV() string { return Zeta.CSVName("1.0.0") }

// StartUnpackFailure starts cluster name (its progress to log; nil: stderr) with OLM v0.28 and
// produces the failure. The caller stops u.C.
func StartUnpackFailure(ctx context.Context, name string, log io.Writer) (*UnpackFailure, error) {
	c, err := cluster.Start(ctx, cluster.Options{Name: name, Nodes: 1, Log: log})
	if err != nil {
		return nil, err
	}
	u := &UnpackFailure{C: c}
	if err := u.fail(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	return u, nil
}

func (u *UnpackFailure) fail(ctx context.Context) error {
	c := u.C
	var err error
	if u.OLM, err = StartOLM(ctx, c, OLMAfter, Zeta); err != nil {
		return err
	}
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: CatalogNamespace, Name: "no-unpack-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if err := c.Client.Create(ctx, quota); err != nil {
		return err
	}
	if u.Namespace, err = OperatorNamespace(ctx, c.Client, "retry"); err != nil {
		return err
	}
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: u.Namespace, Name: "og"}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"60s"}}}`, olm.BundleUnpackTimeoutAnnotation)
	if err := c.Client.Patch(ctx, og, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	u.Sub = NewSubscription(u.Namespace, Zeta.Name, Zeta, v1alpha1.ApprovalAutomatic, "")
	if err := c.Client.Create(ctx, u.Sub); err != nil {
		return err
	}
	key := u.JobKey()
	u.Job = &batchv1.Job{}
	err = testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, key, u.Job); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		s := &v1alpha1.Subscription{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(u.Sub), s); err != nil {
			return false, err
		}
		for _, cond := range u.Job.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue && cond.Reason == batchv1.JobReasonDeadlineExceeded {
				c := s.Status.GetCondition(v1alpha1.SubscriptionBundleUnpackFailed)
				return c != nil && c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("OLM's unpack Job never Failed with DeadlineExceeded with the Subscription BundleUnpackFailed: %w", err)
	}
	u.ConfigMap = &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, key, u.ConfigMap); err != nil {
		return err
	}
	// The cause goes away.
	return c.Client.Delete(ctx, quota)
}

// JobKey names the unpack Job and its ConfigMap.
func (u *UnpackFailure) JobKey() client.ObjectKey {
	return client.ObjectKey{Namespace: CatalogNamespace, Name: olm.UnpackName(Zeta.Image("1.0.0"))}
}

// StillStuck waits d and checks that OLM neither installed the CSV nor replaced the Failed Job.
func (u *UnpackFailure) StillStuck(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	if err := u.C.Client.Get(ctx, client.ObjectKey{Namespace: u.Namespace, Name: u.CSV()}, &v1alpha1.ClusterServiceVersion{}); err == nil {
		return fmt.Errorf("stock OLM %s installed %s after its unpack Job failed: #2265 did not reproduce", OLMAfter, u.CSV())
	}
	now := &batchv1.Job{}
	if err := u.C.Client.Get(ctx, u.JobKey(), now); err != nil || now.UID != u.Job.UID {
		return fmt.Errorf("stock OLM %s replaced the failed unpack Job (%v): #2265 did not reproduce", OLMAfter, err)
	}
	return nil
}
