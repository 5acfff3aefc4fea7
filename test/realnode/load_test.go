package realnode

import (
	"context"
	"fmt"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/load"
	"github.com/olmguard/olmguard/test/scenario"
)

// admissions are the two kinds of objects olmguard's webhook mutates on create, sent through
// the kube-apiserver as OLM sends them: InstallPlans in a namespace with a Subscription (F1:
// the webhook adds the Subscription as owner) and unpack Jobs in a namespace with a
// CatalogSource (F4: the webhook gives the Job a namespace-scoped name).
type admissions struct {
	c      *cluster.Cluster
	cl     client.Client // of load.Config: the load sees each admission's warnings
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
	sub := builders.Subscription(ns, "load", "load", v1alpha1.ApprovalAutomatic)
	if err := c.Client.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(load.Config(c.Config), client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &admissions{c: c, cl: cl, sub: sub, jobsNS: jobsNS, storePlans: storePlans}
}

// plan creates one InstallPlan and reports whether olmguard's webhook gave it its owner.
func (a *admissions) plan(ctx context.Context) (bool, error) {
	ip := builders.InstallPlan(a.sub.Namespace)
	var opts []client.CreateOption
	if !a.storePlans {
		opts = append(opts, client.DryRunAll)
	}
	if err := a.cl.Create(ctx, ip, opts...); err != nil {
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
	if err := a.cl.Create(ctx, j, client.DryRunAll); err != nil {
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

// startLoad sends admissions of a from workers until stopped.
func startLoad(a *admissions, workers int) *load.Load {
	return load.Start(context.Background(), a.next, workers)
}
