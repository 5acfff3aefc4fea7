// Package controller assembles olmguard's controller: a controller-runtime manager with leader
// election, probes and metrics, to which reconcilers are added through Setup values. The
// reconcilers of pkg/controller/<concern> know nothing of it: pkg/setup's registry turns each into
// a Setup.
package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/kubeapi"
	"github.com/olmguard/olmguard/internal/pagedlist"
	"github.com/olmguard/olmguard/internal/unioncache"
	// Registers olmguard's metrics, so /metrics lists them before a reconciler records one.
	_ "github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/metricsauth"
	olmscheme "github.com/olmguard/olmguard/pkg/olm/scheme"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// Setup adds one reconciler to the manager.
type Setup struct {
	// Name identifies the reconciler in errors and in --controllers.
	Name string
	// Add builds the reconciler and registers it with the manager.
	Add func(mgr manager.Manager) error
	// Cache declares every kind the reconciler reads through the manager's cache: which objects,
	// which labels and annotations, which fields. NewManager merges the declarations of the
	// reconcilers it runs, and fails when two disagree (cacheneeds.Merge).
	Cache cacheneeds.Needs
}

// NewManager validates the options, builds the manager with probes and adds the reconcilers.
func NewManager(cfg *rest.Config, o Options, setups ...Setup) (_ manager.Manager, err error) {
	if cfg == nil {
		return nil, errNoConfig
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	setups, err = o.Selected(setups)
	if err != nil {
		return nil, err
	}
	scheme, err := olmscheme.New()
	if err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	decls := make([]cacheneeds.Declared, 0, len(setups))
	for _, s := range setups {
		decls = append(decls, cacheneeds.Declared{Reconciler: s.Name, Needs: s.Cache})
	}
	merged, err := cacheneeds.Merge(scheme, decls)
	if err != nil {
		return nil, err
	}
	limited := kubeapi.WithLimits(cfg)
	var lock *leaderLock
	if o.LeaderElect {
		if lock, err = newLeaderLock(limited, o, scheme); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil { // no manager will stop it
				lock.broadcaster.Shutdown()
			}
		}()
	}
	mgr, err := manager.New(limited, manager.Options{
		Scheme:                  scheme,
		Metrics:                 metricsauth.ServerOptions(o.MetricsBindAddress, o.MetricsSecure),
		HealthProbeBindAddress:  o.HealthProbeBindAddress,
		PprofBindAddress:        o.PprofBindAddress,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        olmguard.ControllerLeaderElectionID,
		LeaderElectionNamespace: o.LeaderElectionNamespace,
		LeaseDuration:           &o.LeaseDuration,
		RenewDeadline:           &o.RenewDeadline,
		RetryPeriod:             &o.RetryPeriod,
		// The process exits right after the manager stops, so the next leader need not wait for
		// the Lease to expire.
		LeaderElectionReleaseOnCancel:       true,
		LeaderElectionResourceLockInterface: lock.orNil(),
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ByObject: merged.ByObject,
			NewInformer: pagedlist.NewInformer(o.CacheListPageSize)},
		NewCache: unioncache.NewCacheFunc(merged.Also),
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr)); err != nil {
		return nil, err
	}
	if lock != nil {
		mgr = leaseReleasing{Manager: mgr, lock: lock}
	}
	for _, s := range setups {
		if s.Add == nil {
			return nil, fmt.Errorf("setting up reconciler %q: no Add function", s.Name)
		}
		if err := s.Add(mgr); err != nil {
			return nil, fmt.Errorf("setting up reconciler %q: %w", s.Name, err)
		}
	}
	return mgr, nil
}

// Run builds the manager and runs it until ctx is done; a clean shutdown returns nil.
func Run(ctx context.Context, cfg *rest.Config, o Options, setups ...Setup) error {
	mgr, err := NewManager(cfg, o, setups...)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// cachesSynced is ready once every informer the reconcilers use has synced.
func cachesSynced(mgr manager.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced")
		}
		return nil
	}
}
