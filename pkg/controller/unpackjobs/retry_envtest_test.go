package unpackjobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/unpackjobs"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestMain runs one control plane; the test starts the controller manager itself, after the
// stock behaviour has been shown.
func TestMain(m *testing.M) { testenv.Main(m, nil) }

// TestRetryFailedUnpackOnAPIServer: on OLM v0.28 (simulated, through the apiserver) a bundle's
// unpack Job fails with DeadlineExceeded; once the cause is gone OLM still finds the Failed Job on
// every resolution and the Subscription stays BundleUnpackFailed (OLM issue #2265). With
// --unpack-retry-failed the controller removes the Job and its empty ConfigMap and nudges the
// Subscription, and the next resolution unpacks and installs.
func TestRetryFailedUnpackOnAPIServer(t *testing.T) {
	env := testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*testenv.Patience)
	defer cancel()
	sim, err := olmsim.Start(ctx, env.Config, env.Scheme, olmsim.Options{Version: olmsim.V0_28, CompleteJobs: true,
		FailJobs: func(*batchv1.Job) bool { return true }})
	if err != nil {
		t.Fatal(err)
	}
	cat := &olmsim.Catalog{Name: "retry", Bundles: []olmsim.Bundle{{Package: "delta", Channel: "stable", CSVName: "delta.v1.0.0",
		Version: "1.0.0", Image: "registry.example/delta-bundle:retry"}}}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	const ns = "retry-a"
	if err := sim.EnsureNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sub, err := sim.CreateSubscription(ctx, ns, "delta", cat, "delta", v1alpha1.ApprovalAutomatic)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Install(ctx, ns, false); !errors.Is(err, olmsim.ErrUnpackFailed) {
		t.Fatalf("install with a failing unpack: %v, want %v", err, olmsim.ErrUnpackFailed)
	}
	name := olm.UnpackName(cat.Bundles[0].Image)
	key := client.ObjectKey{Namespace: cat.Namespace, Name: name}
	failed, cm := &batchv1.Job{}, &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, key, failed); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, key, cm); err != nil {
		t.Fatal(err)
	}

	// Stock: the cause is gone, but every resolution finds the Failed Job.
	sim.FailJobs = nil
	for range 3 {
		if _, err := sim.SyncNamespace(ctx, ns); !errors.Is(err, olmsim.ErrUnpackFailed) {
			t.Fatalf("stock resolution after the cause is gone: %v, want still %v", err, olmsim.ErrUnpackFailed)
		}
	}
	got := &v1alpha1.Subscription{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sub), got); err != nil {
		t.Fatal(err)
	}
	if c := got.Status.GetCondition(v1alpha1.SubscriptionBundleUnpackFailed); c == nil || c.Status != corev1.ConditionTrue {
		t.Fatalf("stock Subscription conditions %+v, want BundleUnpackFailed=True", got.Status.Conditions)
	}

	o := unpackjobs.DefaultOptions()
	o.RetryFailed, o.RetryFailedAfter = true, time.Second
	stop, err := testenv.RunManager(env.Config, testenv.ManagerOptions(), setup.Controller{UnpackJobs: o}.Reconciler(unpackjobs.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()

	testenv.Eventually(t, "the failed Job and its empty ConfigMap removed, the Subscription nudged", func(ctx context.Context) (bool, error) {
		for _, obj := range []client.Object{&batchv1.Job{}, &corev1.ConfigMap{}} {
			err := env.Client.Get(ctx, key, obj)
			if err == nil && (obj.GetUID() == failed.UID || obj.GetUID() == cm.UID) {
				return false, nil
			}
			if client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
		s := &v1alpha1.Subscription{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(sub), s); err != nil {
			return false, err
		}
		_, nudged := s.Annotations[olmguard.ResyncAnnotation]
		return nudged, nil
	})
	if _, err := sim.Install(ctx, ns, false); err != nil {
		t.Fatalf("install after olmguard removed the failed Job: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "delta.v1.0.0"}, &v1alpha1.ClusterServiceVersion{}); err != nil {
		t.Fatalf("CSV after the retry: %v", err)
	}
	testenv.Eventually(t, "a "+unpackjobs.EventUnpackRetried+" Event on the Subscription", func(ctx context.Context) (bool, error) {
		events := &corev1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == unpackjobs.EventUnpackRetried && e.InvolvedObject.Name == sub.Name {
				return true, nil
			}
		}
		return false, nil
	})
}
