package controller_test

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/testenv"
)

// releaseIfHeld clears the Lease only while this process holds it: a successor that took over
// keeps it, a missing Lease is no error.
func TestReleaseIfHeld(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	ns := testenv.FreshNamespace(t, env.Client, "olmguard-release")
	o := controller.DefaultOptions()
	o.LeaderElectionNamespace = ns
	identity, releaseIfHeld, stop, err := controller.NewLeaderLockForTest(env.Config, o, env.Scheme)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := releaseIfHeld(ctx); err != nil {
		t.Fatalf("no Lease yet: %v", err)
	}

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: olmguard.ControllerLeaderElectionID},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("successor"), LeaseDurationSeconds: ptr.To[int32](15)}}
	if err := env.Client.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	holder := func() string {
		t.Helper()
		got := &coordinationv1.Lease{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(lease), got); err != nil {
			t.Fatal(err)
		}
		return ptr.Deref(got.Spec.HolderIdentity, "")
	}
	if err := releaseIfHeld(ctx); err != nil || holder() != "successor" {
		t.Errorf("a successor's Lease: err %v, holder %q, want it kept", err, holder())
	}

	lease.Spec.HolderIdentity = ptr.To(identity)
	if err := env.Client.Update(ctx, lease); err != nil {
		t.Fatal(err)
	}
	if err := releaseIfHeld(ctx); err != nil || holder() != "" {
		t.Errorf("its own Lease: err %v, holder %q, want released", err, holder())
	}
}
