package realolm

import (
	"context"
	"fmt"
	"os"
	"testing"
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

// TestUnpackRetryFailed replays OLM #2265 on OLM v0.28's own binaries: a bundle unpack Job that
// fails (DeadlineExceeded: a ResourceQuota in the catalog namespace lets no unpack pod start, as an
// image that is never pulled does, and the OperatorGroup sets a 60 s unpack timeout) leaves the
// Subscription BundleUnpackFailed; once the quota is gone stock OLM still finds the Failed Job and
// stays stuck. olmguard with --unpack-retry-failed removes the Job and its empty ConfigMap and
// nudges the Subscription, and the install goes through.
func TestUnpackRetryFailed(t *testing.T) {
	if version() != Version {
		t.Skipf("runs OLM %s on a cluster of its own; OLM under test is %s", OLMAfter, version())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c := must(cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d-retry", os.Getpid()), Nodes: 1}))(t)
	t.Cleanup(func() { _ = c.Stop() })
	o := must(StartOLM(ctx, c, OLMAfter, Zeta))(t)

	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.OLMNamespace, Name: "no-unpack-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if err := c.Client.Create(ctx, quota); err != nil {
		t.Fatal(err)
	}
	ns := operatorNamespace(t, c, "retry")
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "og"}}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"60s"}}}`, olm.BundleUnpackTimeoutAnnotation)
	if err := c.Client.Patch(ctx, og, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatal(err)
	}
	sub := subscribe(t, c, ns, Zeta.Name, Zeta, v1alpha1.ApprovalAutomatic, "")
	key := client.ObjectKey{Namespace: cluster.OLMNamespace, Name: olm.UnpackName(Zeta.Image("1.0.0"))}
	failed, cm := &batchv1.Job{}, &corev1.ConfigMap{}
	testenv.Eventually(t, "OLM's unpack Job Failed with DeadlineExceeded and the Subscription BundleUnpackFailed", func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, key, failed); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		s := &v1alpha1.Subscription{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sub), s); err != nil {
			return false, err
		}
		for _, cond := range failed.Status.Conditions {
			if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue && cond.Reason == batchv1.JobReasonDeadlineExceeded {
				c := s.Status.GetCondition(v1alpha1.SubscriptionBundleUnpackFailed)
				return c != nil && c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err := c.Client.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}
	// The cause goes away; stock OLM keeps finding the Failed Job.
	if err := c.Client.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stockStuckFor)
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: Zeta.CSVName("1.0.0")}, &v1alpha1.ClusterServiceVersion{}); err == nil {
		t.Fatalf("stock OLM %s installed %s after its unpack Job failed: #2265 did not reproduce", OLMAfter, Zeta.CSVName("1.0.0"))
	}
	now := &batchv1.Job{}
	if err := c.Client.Get(ctx, key, now); err != nil || now.UID != failed.UID {
		t.Fatalf("stock OLM %s replaced the failed unpack Job (%v): #2265 did not reproduce", OLMAfter, err)
	}
	t.Logf("stock OLM %s: Job %s Failed (DeadlineExceeded), install stuck %s after the cause is gone", OLMAfter, failed.Name, stockStuckFor)

	started := time.Now()
	runOlmguard(t, c, "--unpack-retry-failed", "--unpack-retry-failed-after=30s")
	waitCSV(t, c, ns, Zeta.CSVName("1.0.0"))
	t.Logf("olmguard --unpack-retry-failed: %s Succeeded %s after olmguard started", Zeta.CSVName("1.0.0"), time.Since(started).Round(100*time.Millisecond))
	if err := c.Client.Get(ctx, key, now); err == nil && now.UID == failed.UID {
		t.Errorf("the failed unpack Job %s is still there", failed.Name)
	}
	newCM := &corev1.ConfigMap{}
	if err := c.Client.Get(ctx, key, newCM); err != nil || newCM.UID == cm.UID {
		t.Errorf("unpack ConfigMap not recreated by OLM after olmguard deleted it (err %v, same UID %v)", err, newCM.UID == cm.UID)
	}
	checkNudgedByController(t, c, ns)
	checkLogs(t, o)
}
