package controller

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// NewLeaderLockForTest builds the controller's Lease lock for the external tests, which envtest's
// import of this package keeps outside it: its identity, its releaseIfHeld, and a stop for its
// Event broadcaster.
func NewLeaderLockForTest(cfg *rest.Config, o Options, scheme *runtime.Scheme) (identity string, release func(context.Context) error, stop func(), err error) {
	l, err := newLeaderLock(cfg, o, scheme)
	if err != nil {
		return "", nil, nil, err
	}
	return l.Identity(), l.releaseIfHeld, l.broadcaster.Shutdown, nil
}
