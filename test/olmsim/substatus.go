package olmsim

import (
	"context"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// SyncSubscriptionStatus is the subscription syncer's installPlanReconciler for one Subscription
// (olm-facts.md §2.2): it maps its plan's phase, or the plan's absence, to the InstallPlanPending,
// InstallPlanFailed and InstallPlanMissing conditions.
func (s *Sim) SyncSubscriptionStatus(ctx context.Context, ns, name string) error {
	sub := &v1alpha1.Subscription{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, sub); err != nil {
		return client.IgnoreNotFound(err)
	}
	ref := sub.Status.InstallPlanRef
	if ref == nil {
		return nil
	}
	ip := &v1alpha1.InstallPlan{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, ip)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	missing := apierrors.IsNotFound(err)
	return s.updateSubscriptionStatusIfChanged(ctx, sub, func(st *v1alpha1.SubscriptionStatus) {
		st.RemoveConditions(v1alpha1.SubscriptionInstallPlanPending, v1alpha1.SubscriptionInstallPlanFailed)
		now := s.now()
		if missing {
			if st.State == v1alpha1.SubscriptionStateUpgradePending {
				// Forces re-resolution: a new plan is made.
				st.InstallPlanRef, st.Install, st.CurrentCSV, st.State = nil, nil, "", v1alpha1.SubscriptionStateNone
				return
			}
			st.SetCondition(v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionInstallPlanMissing, Status: corev1.ConditionTrue,
				Reason: v1alpha1.ReasonReferencedInstallPlanNotFound, LastTransitionTime: &now})
			return
		}
		st.RemoveConditions(v1alpha1.SubscriptionInstallPlanMissing)
		msg := extractMessage(ip.Status)
		switch ip.Status.Phase {
		case v1alpha1.InstallPlanPhaseNone:
			st.SetCondition(v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionInstallPlanPending, Status: corev1.ConditionTrue,
				Reason: v1alpha1.ReasonInstallPlanNotYetReconciled, Message: msg, LastTransitionTime: &now})
		case v1alpha1.InstallPlanPhasePlanning, v1alpha1.InstallPlanPhaseInstalling, v1alpha1.InstallPlanPhaseRequiresApproval:
			st.SetCondition(v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionInstallPlanPending, Status: corev1.ConditionTrue,
				Reason: string(ip.Status.Phase), Message: msg, LastTransitionTime: &now})
		case v1alpha1.InstallPlanPhaseFailed:
			reason := v1alpha1.ReasonInstallPlanFailed
			for _, c := range ip.Status.Conditions {
				if c.Type == v1alpha1.InstallPlanInstalled && c.Status == corev1.ConditionFalse && c.Reason != "" {
					reason = c.Reason
				}
			}
			st.SetCondition(v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionInstallPlanFailed, Status: corev1.ConditionTrue,
				Reason: reason, Message: msg, LastTransitionTime: &now})
		}
	})
}

// updateSubscriptionStatusIfChanged writes the mutated status only when it differs from the live
// one other than in its times: OLM's syncer compares hashes that ignore lastTransitionTime
// (comparison.NewHashEqualitor), so a sync that changes nothing writes nothing.
func (s *Sim) updateSubscriptionStatusIfChanged(ctx context.Context, sub *v1alpha1.Subscription, mutate func(*v1alpha1.SubscriptionStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &v1alpha1.Subscription{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		before := fresh.Status.DeepCopy()
		mutate(&fresh.Status)
		if equalJSON(withoutTimes(*before), withoutTimes(fresh.Status)) {
			return nil
		}
		fresh.Status.LastUpdated = s.now()
		return s.Client.Status().Update(ctx, fresh)
	})
}

func withoutTimes(st v1alpha1.SubscriptionStatus) v1alpha1.SubscriptionStatus {
	st.LastUpdated = metav1.Time{}
	st.Conditions = append([]v1alpha1.SubscriptionCondition(nil), st.Conditions...)
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime, st.Conditions[i].LastHeartbeatTime = nil, nil
	}
	return st
}

// RunSubscriptionSyncer runs the subscription syncer the way the catalog-operator's informers
// drive it, for one namespace, until ctx is done: every Subscription event syncs that Subscription
// (an annotation change included), and every InstallPlan event syncs the plan's owners only
// (NotifyOnInstallPlan). There is no periodic resync, so a Subscription that is not notified
// stays stale, as in OLM between its long resyncs.
func (s *Sim) RunSubscriptionSyncer(ctx context.Context, ns string) {
	var wg sync.WaitGroup // returns once both loops have, so that a caller can stop OLM for good
	wg.Go(func() {
		s.watchLoop(ctx, &v1alpha1.SubscriptionList{}, ns, func(obj client.Object) {
			_ = s.SyncSubscriptionStatus(ctx, ns, obj.GetName())
		})
	})
	s.watchLoop(ctx, &v1alpha1.InstallPlanList{}, ns, func(obj client.Object) {
		if ip, ok := obj.(*v1alpha1.InstallPlan); ok {
			_ = s.NotifyOnInstallPlan(ctx, ip)
		}
	})
	wg.Wait()
}

// watchLoop calls handle for every object event of list in ns, re-opening the watch when the
// apiserver closes it, until ctx is done.
func (s *Sim) watchLoop(ctx context.Context, list client.ObjectList, ns string, handle func(client.Object)) {
	for ctx.Err() == nil {
		w, err := s.watcher.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		for ev := range w.ResultChan() {
			if obj, ok := ev.Object.(client.Object); ok && ev.Type != watch.Error && ev.Type != watch.Bookmark {
				handle(obj)
			}
		}
		w.Stop()
	}
}

// NotifyOnInstallPlan is what the catalog-operator does on every InstallPlan event: it syncs the
// Subscriptions that own the plan, found by ownerReference kind. A Subscription missing from the
// plan's owners is not notified (the F2 consequence of OLM issue #3199).
func (s *Sim) NotifyOnInstallPlan(ctx context.Context, ip *v1alpha1.InstallPlan) error {
	for _, ref := range ip.OwnerReferences {
		if ref.Kind != olm.SubscriptionKind {
			continue
		}
		if err := s.SyncSubscriptionStatus(ctx, ip.Namespace, ref.Name); err != nil {
			return err
		}
	}
	return nil
}

func extractMessage(st v1alpha1.InstallPlanStatus) string {
	for _, c := range st.Conditions {
		if c.Type == v1alpha1.InstallPlanInstalled && c.Message != "" {
			return c.Message
		}
	}
	var msgs []string
	for _, l := range st.BundleLookups {
		for _, c := range l.Conditions {
			if c.Type == v1alpha1.BundleLookupPending && c.Message != "" {
				msgs = append(msgs, c.Message)
			}
		}
	}
	return strings.Join(msgs, ". ")
}
