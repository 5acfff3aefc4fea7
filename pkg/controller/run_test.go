package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestRunWithLeaderElection runs the manager against a real apiserver: reconcilers added through a
// Setup start once the Lease is won, /readyz answers 200, and cancelling stops it cleanly and
// releases the Lease.
func TestRunWithLeaderElection(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	ns := testenv.FreshNamespace(t, env.Client, "olmguard-le")
	health := testenv.FreePort(t)
	o := controller.DefaultOptions()
	o.LeaderElect = true
	o.LeaderElectionNamespace = ns
	o.MetricsBindAddress = "0"
	o.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", health)

	stop := runUntilLeading(t, env.Config, o)
	lease := &coordinationv1.Lease{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: olmguard.ControllerLeaderElectionID}, lease); err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Error("the Lease has no holder")
	}
	deadline := time.Now().Add(testenv.Patience)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz did not answer 200")
		}
		time.Sleep(100 * time.Millisecond)
	}

	stop()
	checkReleased(t, env.Client, client.ObjectKeyFromObject(lease))
}

// TestRunReleasesTheLeaseClientGoCouldNot: on cancel client-go reads the Lease and writes it
// released, once, with no retry. A renewal the cancel cut off client-side may still land in
// between (seen in CI: "Failed to release lease ... the object has been modified"), and the Lease
// then stays held until it expires. Run releases it from a fresh read. Forced here: the first read
// of the Lease after the cancel is answered, then the Lease is updated from outside before
// client-go writes. Failed before: "the Lease is still held".
func TestRunReleasesTheLeaseClientGoCouldNot(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	ns := testenv.FreshNamespace(t, env.Client, "olmguard-le-raced")
	key := client.ObjectKey{Namespace: ns, Name: olmguard.ControllerLeaderElectionID}
	var armed, raced atomic.Bool
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return testenv.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err == nil && req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/leases/"+key.Name) &&
				armed.Load() && raced.CompareAndSwap(false, true) {
				lease := &coordinationv1.Lease{}
				if gerr := env.Client.Get(ctx, key, lease); gerr == nil {
					lease.Labels = map[string]string{"raced": "true"}
					if uerr := env.Client.Update(ctx, lease); uerr != nil {
						t.Errorf("updating the Lease between client-go's read and write: %v", uerr)
					}
				}
			}
			return resp, err
		})
	})
	o := controller.DefaultOptions()
	o.LeaderElect, o.LeaderElectionNamespace = true, ns
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	// No renewal reads the Lease between the first one and the cancel.
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Minute, 90*time.Second, 30*time.Second
	stop := runUntilLeading(t, cfg, o)
	armed.Store(true)
	stop()
	if !raced.Load() {
		t.Fatal("the Lease was not read after the cancel: the race was not forced")
	}
	checkReleased(t, env.Client, key)
}

// runUntilLeading runs the controller with o until it leads (a plain Runnable needs leader
// election, as reconcilers do, and starts once the Lease is won); stop cancels it and waits for
// Run to return nil.
func runUntilLeading(t *testing.T, cfg *rest.Config, o controller.Options) (stop func()) {
	t.Helper()
	leading := make(chan struct{})
	setup := controller.Setup{Name: "probe", Add: func(mgr manager.Manager) error {
		return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { close(leading); <-ctx.Done(); return nil }))
	}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx, cfg, o, setup) }()
	select {
	case <-leading:
	case err := <-done:
		t.Fatalf("Run returned early: %v", err)
	case <-time.After(testenv.Patience):
		t.Fatalf("the reconciler did not start within %s", testenv.Patience)
	}
	return func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after cancel, want nil", err)
			}
		case <-time.After(testenv.Patience):
			t.Fatalf("Run did not return within %s of cancel", testenv.Patience)
		}
	}
}

func checkReleased(t *testing.T, c client.Client, key client.ObjectKey) {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), key, lease); err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("the Lease is still held by %q after shutdown", *h)
	}
}
