package tier

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/olmguard/olmguard/test/realolm"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestUnpackRetryFailed replays OLM #2265 on OLM v0.28's own binaries (StartUnpackFailure): a
// bundle unpack Job that failed with DeadlineExceeded leaves the Subscription BundleUnpackFailed;
// once the cause is gone stock OLM still finds the Failed Job and stays stuck. olmguard with --unpack-retry-failed removes the Job and its empty ConfigMap and
// nudges the Subscription, and the install goes through.
func TestUnpackRetryFailed(t *testing.T) {
	declare(t, "unpack retry after a failed unpack", false)
	if version() != realolm.Version {
		skipf(t, "runs OLM %s on a cluster of its own; OLM under test is %s", realolm.OLMAfter, version())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	u := must(realolm.StartUnpackFailure(ctx, fmt.Sprintf("olmguard-realolm-%d-retry", os.Getpid()), nil))(t)
	t.Cleanup(func() { _ = u.C.Stop() })
	c, o, ns, key, failed, cm := u.C, u.OLM, u.Namespace, u.JobKey(), u.Job, u.ConfigMap
	if err := u.StillStuck(ctx, stockStuckFor); err != nil {
		t.Fatal(err)
	}
	t.Logf("stock OLM %s: Job %s Failed (DeadlineExceeded), install stuck %s after the cause is gone", realolm.OLMAfter, failed.Name, stockStuckFor)

	started := time.Now()
	runOlmguard(t, c, "--unpack-retry-failed", "--unpack-retry-failed-after=30s")
	waitCSV(t, c, ns, realolm.Zeta.CSVName("1.0.0"))
	t.Logf("olmguard --unpack-retry-failed: %s Succeeded %s after olmguard started", realolm.Zeta.CSVName("1.0.0"), time.Since(started).Round(100*time.Millisecond))
	now := &batchv1.Job{}
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
