package realnode

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/scenario"
)

// admissions are the two kinds of objects olmguard's webhook mutates on create, sent through
// the kube-apiserver as OLM sends them: InstallPlans in a namespace with a Subscription (F1:
// the webhook adds the Subscription as owner) and unpack Jobs in a namespace with a
// CatalogSource (F4: the webhook gives the Job a namespace-scoped name).
type admissions struct {
	c      *cluster.Cluster
	sub    *v1alpha1.Subscription
	jobsNS string
	// storePlans creates the plans for real (the controller then watches them too); Jobs and,
	// unless set, plans are dry-run creates: admitted in full, never stored.
	storePlans bool
}

// newAdmissions creates namespace ns with a Subscription for the plans; Jobs go to jobsNS, which
// must hold a CatalogSource.
func newAdmissions(t *testing.T, c *cluster.Cluster, ns, jobsNS string, storePlans bool) *admissions {
	t.Helper()
	ctx := context.Background()
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	sub := scenario.Subscription(ns, "load", "load", v1alpha1.ApprovalAutomatic)
	if err := c.Client.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	return &admissions{c: c, sub: sub, jobsNS: jobsNS, storePlans: storePlans}
}

// plan creates one InstallPlan and reports whether olmguard's webhook gave it its owner.
func (a *admissions) plan(ctx context.Context) (bool, error) {
	ip := scenario.InstallPlan(a.sub.Namespace)
	var opts []client.CreateOption
	if !a.storePlans {
		opts = append(opts, client.DryRunAll)
	}
	if err := a.c.Client.Create(ctx, ip, opts...); err != nil {
		return false, fmt.Errorf("creating an InstallPlan: %w", err)
	}
	return scenario.OwnedBy(ip, a.sub.UID), nil
}

// job dry-run creates an unpack Job as OLM v0.26+ writes it and reports whether olmguard's
// webhook renamed it.
func (a *admissions) job(ctx context.Context, i int64) (bool, error) {
	name := olm.UnpackName(fmt.Sprintf("registry.example/load:v%d", i))
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: a.jobsNS,
			Labels:          map[string]string{olm.ManagedLabel: "true", olm.BundleUnpackRefLabel: name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: "load"}}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "extract", Image: "registry.example/opm:v1"}},
		}}, BackoffLimit: ptr.To[int32](3)},
	}
	if err := a.c.Client.Create(ctx, j, client.DryRunAll); err != nil {
		return false, fmt.Errorf("creating an unpack Job: %w", err)
	}
	return j.Name == unpack.ScopedName(a.jobsNS, name), nil
}

// next sends the i-th admission: plans and Jobs alternate. It returns the kind sent.
func (a *admissions) next(ctx context.Context, i int64) (string, bool, error) {
	if i%2 == 0 {
		ok, err := a.plan(ctx)
		return "InstallPlan", ok, err
	}
	ok, err := a.job(ctx, i)
	return "Job", ok, err
}

// load sends admissions from a few workers until stopped and counts the answers.
type load struct {
	a  *admissions
	wg sync.WaitGroup

	stopping                        atomic.Bool
	sent, mutated, unmutated, fails atomic.Int64
	began                           time.Time
	mu                              sync.Mutex
	lastErr                         error
	missed                          []string // each unmutated object: its kind and when it came back
}

// startLoad starts workers that send admissions back to back. Each finishes its request when
// stopped: a request cancelled in flight would cancel the apiserver's call to the webhook.
func startLoad(a *admissions, workers int) *load {
	l := &load{a: a, began: time.Now()}
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for !l.stopping.Load() {
				kind, ok, err := a.next(context.Background(), l.sent.Add(1))
				switch {
				case err != nil:
					l.fails.Add(1)
					l.mu.Lock()
					l.lastErr = err
					l.mu.Unlock()
				case ok:
					l.mutated.Add(1)
				default:
					l.unmutated.Add(1)
					l.mu.Lock()
					l.missed = append(l.missed, fmt.Sprintf("%s at +%s", kind, time.Since(l.began).Round(time.Millisecond)))
					l.mu.Unlock()
				}
			}
		}()
	}
	return l
}

// stop waits for the workers and fails t on any admission without olmguard's answer or any
// failed request.
func (l *load) stop(t *testing.T, what string) {
	t.Helper()
	l.stopping.Store(true)
	l.wg.Wait()
	t.Logf("%s: %d admissions (InstallPlans and unpack Jobs), %d mutated, %d unmutated, %d failed", what, l.sent.Load(), l.mutated.Load(), l.unmutated.Load(), l.fails.Load())
	if l.sent.Load() == 0 {
		t.Errorf("%s: no admission was sent", what)
	}
	if n := l.unmutated.Load(); n > 0 {
		t.Errorf("%s: %d objects were admitted without olmguard's mutation (load started at %s): %v", what, n, l.began.Format("15:04:05.000"), l.missed)
	}
	if n := l.fails.Load(); n > 0 {
		t.Errorf("%s: %d requests failed, the last: %v", what, n, l.lastErr)
	}
}
