package controller

import (
	"context"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

// leaderLock is the Lease the controller elects its leader with. controller-runtime would build
// it too, but with an identity it keeps to itself; built here, Run knows it and can release the
// Lease itself should client-go's release on cancel have failed (releaseIfHeld).
type leaderLock struct {
	*resourcelock.LeaseLock
	broadcaster record.EventBroadcaster
}

// newLeaderLock builds the Lease lock as controller-runtime does: an identity of the host name
// and a UUID, clients whose timeout is half the renew deadline (at least 1 s) so that one hung
// request cannot cost the leadership, and the LeaderElection Events recorded on the Lease.
func newLeaderLock(cfg *rest.Config, o Options, scheme *runtime.Scheme) (*leaderLock, error) {
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	id := host + "_" + string(uuid.NewUUID())
	c := rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	c.Timeout = max(o.RenewDeadline/2, time.Second)
	coordination, err := coordinationv1client.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	core, err := corev1client.NewForConfig(c)
	if err != nil {
		return nil, err
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: core.Events("")})
	return &leaderLock{
		LeaseLock: &resourcelock.LeaseLock{
			LeaseMeta: metav1.ObjectMeta{Namespace: o.LeaderElectionNamespace, Name: olmguard.ControllerLeaderElectionID},
			Client:    coordination,
			LockConfig: resourcelock.ResourceLockConfig{Identity: id,
				EventRecorder: broadcaster.NewRecorder(scheme, corev1.EventSource{Component: id})},
		},
		broadcaster: broadcaster,
	}, nil
}

// releaseIfHeld gives up the Lease when this process still holds it once the manager has stopped
// (its elector with it). client-go releases on cancel with the Lease it last read: a renewal the
// cancel cut off after the apiserver applied it leaves that copy stale, the release fails on a
// conflict ("the object has been modified") and the next leader waits out LeaseDuration. This
// reads the Lease afresh and clears it only while its holder is this process's identity, so a
// successor that took over in between keeps it.
func (l *leaderLock) releaseIfHeld(ctx context.Context) error {
	leases := l.Client.Leases(l.LeaseMeta.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		lease, err := leases.Get(ctx, l.LeaseMeta.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		if !heldBy(lease, l.Identity()) {
			return nil
		}
		now := metav1.NewMicroTime(time.Now())
		// What client-go's own release writes: no holder, and a duration of 1 s.
		lease.Spec.HolderIdentity = ptr.To("")
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](1)
		lease.Spec.AcquireTime, lease.Spec.RenewTime = &now, &now
		_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
		return err
	})
}

func heldBy(lease *coordinationv1.Lease, identity string) bool {
	return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == identity
}

// stop releases the Lease if still held (bounded by a few seconds: the process is exiting) and
// stops the Event broadcaster, flushing what it still holds.
func (l *leaderLock) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := l.releaseIfHeld(ctx)
	l.broadcaster.Shutdown()
	if err != nil {
		return fmt.Errorf("releasing the Lease %s/%s: %w", l.LeaseMeta.Namespace, l.LeaseMeta.Name, err)
	}
	return nil
}

// leaseReleasing is a manager whose Start, once the manager has stopped, releases the Lease the
// manager may still hold (leaderLock.releaseIfHeld). A failed release is logged, not returned:
// the next leader then waits out LeaseDuration, as it would after a crash.
type leaseReleasing struct {
	manager.Manager
	lock *leaderLock
}

func (m leaseReleasing) Start(ctx context.Context) error {
	err := m.Manager.Start(ctx)
	if rerr := m.lock.stop(); rerr != nil {
		m.GetLogger().Error(rerr, "the next leader waits for the Lease to expire")
	}
	return err
}

// orNil is l as the manager's option: a nil interface, not a typed nil, when there is no lock.
func (l *leaderLock) orNil() resourcelock.Interface {
	if l == nil {
		return nil
	}
	return l
}
