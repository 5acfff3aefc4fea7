package olmsim

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// maxInstallPlanCount is how many InstallPlans gcInstallPlans keeps per namespace.
const maxInstallPlanCount = 5

// ErrUnpacking is returned by SyncNamespace while bundles are still being unpacked; OLM requeues
// the namespace after 5s.
var ErrUnpacking = errors.New("bundles are still being unpacked")

// ErrUnpackFailed is returned by SyncNamespace when an unpack Job failed. OLM then sets
// BundleUnpackFailed on the Subscriptions and does not requeue: it relies on its periodic
// resync, which finds the same Failed Job (before v0.43; OLM issue #2265). v0.43+ requeues after
// 5 minutes, once the Job's TTL of 300 s removed it (OLM PR #3832).
var ErrUnpackFailed = errors.New("bundle unpacking failed")

// resolution is what the resolver decided for one Subscription.
type resolution struct {
	sub     *v1alpha1.Subscription
	bundle  *Bundle
	catalog *Catalog
}

// SyncNamespace is one pass of the catalog-operator's syncResolvingNamespace for a namespace
// (olm-facts.md §1.1): GC of old plans, a first live List of Subscriptions, the CSV state check,
// a second live List inside the resolver, bundle unpacking, then ensureInstallPlan with the FIRST
// snapshot as owners and setIPReference on the Subscriptions the resolver updated.
// It returns the InstallPlan it created or reused, if any.
func (s *Sim) SyncNamespace(ctx context.Context, ns string) (*v1alpha1.InstallPlan, error) {
	if err := s.gcInstallPlans(ctx, ns); err != nil {
		return nil, err
	}
	subs, err := s.listSubscriptions(ctx, ns)
	if err != nil || len(subs) == 0 {
		return nil, err
	}
	maxGeneration := 0
	for _, sub := range subs {
		maxGeneration = max(maxGeneration, sub.Status.InstallPlanGeneration)
	}
	changed, err := s.ensureSubscriptionCSVState(ctx, subs)
	if err != nil || changed {
		return nil, err
	}
	if s.Hooks.BetweenSubscriptionLists != nil {
		if err := s.Hooks.BetweenSubscriptionLists(ctx, ns); err != nil {
			return nil, err
		}
	}
	// ResolveSteps does its own, later, live List (step_resolver.go).
	resolvedSubs, err := s.listSubscriptions(ctx, ns)
	if err != nil {
		return nil, err
	}
	updated := s.resolve(ctx, resolvedSubs)
	if len(updated) == 0 {
		return nil, nil
	}

	// No InstallPlan is created until every bundle is unpacked (v0.25+, OLM PR #2942).
	var steps []*v1alpha1.Step
	var sources []string
	for _, r := range updated {
		res, err := s.UnpackBundle(ctx, r.catalog, r.bundle, ns)
		if err != nil {
			_ = s.setConditions(ctx, subs, v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpackFailed,
				Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonErrorPreventedUnpacking, Message: err.Error()})
			return nil, fmt.Errorf("bundle unpacking failed with an error: %w", err)
		}
		if res.Failed {
			cond := failedCondition(res.Job)
			err := fmt.Errorf("%w. Reason: %v, and Message: %v", ErrUnpackFailed, cond.Reason, cond.Message)
			_ = s.setConditions(ctx, subs, v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpackFailed,
				Status: corev1.ConditionTrue, Reason: "BundleUnpackFailed", Message: err.Error()})
			return nil, err
		}
		if !res.Complete {
			_ = s.setConditions(ctx, resolvedSubs, v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpacking,
				Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonUnpackingInProgress})
			return nil, ErrUnpacking
		}
		steps = append(steps, s.stepsFor(r, res)...)
		sources = appendUnique(sources, r.catalog.Name)
	}

	approval := v1alpha1.ApprovalAutomatic
	for _, sub := range resolvedSubs {
		if sub.Spec.InstallPlanApproval == v1alpha1.ApprovalManual {
			approval = v1alpha1.ApprovalManual // one Manual Subscription makes every plan Manual
		}
	}
	plans, err := s.listInstallPlans(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, ip := range plans {
		maxGeneration = max(maxGeneration, ip.Spec.Generation)
	}
	ip, err := s.ensureInstallPlan(ctx, ns, maxGeneration+1, subs, approval, steps, sources)
	if err != nil {
		_ = s.setConditions(ctx, subs, v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpackFailed,
			Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonEnsureInstallPlanFailed, Message: err.Error()})
		return nil, err
	}
	for _, r := range updated {
		if err := s.setIPReference(ctx, r, ip); err != nil {
			return ip, err
		}
	}
	return ip, nil
}

// resolve picks the Subscriptions that need a plan: new ones, ones whose CSV vanished, and ones
// with an upgrade, skipping those already waiting on a plan (nothingToUpdate).
func (s *Sim) resolve(ctx context.Context, subs []*v1alpha1.Subscription) []resolution {
	var out []resolution
	for _, sub := range subs {
		if sub.Status.InstallPlanRef != nil && sub.Status.State == v1alpha1.SubscriptionStateUpgradePending {
			continue
		}
		cat := s.catalogs.get(types.NamespacedName{Namespace: sub.Spec.CatalogSourceNamespace, Name: sub.Spec.CatalogSource})
		if cat == nil {
			continue
		}
		var b *Bundle
		switch {
		case sub.Status.InstalledCSV == "":
			if b = cat.bundle(sub.Spec.StartingCSV); b == nil {
				b = cat.head(sub.Spec.Package, sub.Spec.Channel)
			}
		case !s.csvExists(ctx, sub.Namespace, sub.Status.InstalledCSV):
			b = cat.bundle(sub.Status.InstalledCSV) // the Subscription re-creates a deleted CSV
		default:
			b = cat.next(sub.Spec.Package, sub.Status.InstalledCSV)
		}
		if b != nil {
			out = append(out, resolution{sub: sub, bundle: b, catalog: cat})
		}
	}
	return out
}

func (s *Sim) csvExists(ctx context.Context, ns, name string) bool {
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.ClusterServiceVersion{})
	return !apierrors.IsNotFound(err)
}

// ensureSubscriptionCSVState moves UpgradePending Subscriptions whose CSV now exists to
// AtLatestKnown. It reports whether it changed any; OLM then ends the sync.
func (s *Sim) ensureSubscriptionCSVState(ctx context.Context, subs []*v1alpha1.Subscription) (bool, error) {
	changed := false
	for _, sub := range subs {
		if sub.Status.State != v1alpha1.SubscriptionStateUpgradePending || sub.Status.CurrentCSV == "" {
			continue
		}
		csv := &v1alpha1.ClusterServiceVersion{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: sub.Status.CurrentCSV}, csv); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return false, err
		}
		err := s.updateSubscriptionStatus(ctx, sub, func(st *v1alpha1.SubscriptionStatus) {
			st.State = v1alpha1.SubscriptionStateAtLatest
			st.InstalledCSV = st.CurrentCSV
		})
		if err != nil {
			return false, err
		}
		changed = true
	}
	return changed, nil
}

// ensureInstallPlan reuses a plan of the same generation unchanged (no owners added, OLM since
// 0.15) or creates one owned by every Subscription in subs.
func (s *Sim) ensureInstallPlan(ctx context.Context, ns string, gen int, subs []*v1alpha1.Subscription,
	approval v1alpha1.Approval, steps []*v1alpha1.Step, sources []string) (*v1alpha1.InstallPlan, error) {
	s.muInstallPlan.Lock()
	defer s.muInstallPlan.Unlock()
	plans, err := s.listInstallPlans(ctx, ns)
	if err != nil {
		return nil, err
	}
	for _, ip := range plans {
		if ip.Spec.Generation == gen {
			return ip, nil
		}
	}
	return s.createInstallPlan(ctx, ns, gen, subs, approval, steps, sources)
}

func (s *Sim) createInstallPlan(ctx context.Context, ns string, gen int, subs []*v1alpha1.Subscription,
	approval v1alpha1.Approval, steps []*v1alpha1.Step, sources []string) (*v1alpha1.InstallPlan, error) {
	var csvNames []string
	for _, st := range steps {
		if st.Resource.Kind == olm.ClusterServiceVersionKind {
			csvNames = append(csvNames, st.Resource.Name)
		}
	}
	ip := &v1alpha1.InstallPlan{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "install-", Namespace: ns},
		Spec: v1alpha1.InstallPlanSpec{
			ClusterServiceVersionNames: csvNames,
			Approval:                   approval,
			Approved:                   approval == v1alpha1.ApprovalAutomatic,
			Generation:                 gen,
		},
	}
	// Owners come from the snapshot taken at the start of the sync (OLM issue #3199).
	for _, sub := range subs {
		addNonBlockingOwner(ip, sub, v1alpha1.GroupVersion.WithKind(olm.SubscriptionKind))
	}
	if err := s.Client.Create(ctx, ip); err != nil {
		return nil, fmt.Errorf("creating InstallPlan: %w", err)
	}
	if s.Hooks.AfterInstallPlanCreate != nil {
		if err := s.Hooks.AfterInstallPlanCreate(ctx, ip); err != nil {
			return nil, err
		}
	}
	phase := v1alpha1.InstallPlanPhaseInstalling
	if approval == v1alpha1.ApprovalManual {
		phase = v1alpha1.InstallPlanPhaseRequiresApproval
	}
	// The first status is a second write on the object Create returned: a write in between makes
	// it fail with a conflict and leaves a plan with no status.
	ip.Status = v1alpha1.InstallPlanStatus{Phase: phase, Plan: steps, CatalogSources: sources}
	if err := s.Client.Status().Update(ctx, ip); err != nil {
		return nil, fmt.Errorf("writing the first status of InstallPlan %s/%s: %w", ns, ip.Name, err)
	}
	return ip, nil
}

// setIPReference points an updated Subscription at its plan.
func (s *Sim) setIPReference(ctx context.Context, r resolution, ip *v1alpha1.InstallPlan) error {
	return s.updateSubscriptionStatus(ctx, r.sub, func(st *v1alpha1.SubscriptionStatus) {
		st.InstallPlanRef = &corev1.ObjectReference{Kind: olm.InstallPlanKind, APIVersion: olm.V1alpha1APIVersion,
			Namespace: ip.Namespace, Name: ip.Name, UID: ip.UID, ResourceVersion: ip.ResourceVersion}
		st.Install = &v1alpha1.InstallPlanReference{APIVersion: olm.V1alpha1APIVersion, Kind: olm.InstallPlanKind, Name: ip.Name, UID: string(ip.UID)}
		st.InstallPlanGeneration = ip.Spec.Generation
		st.State = v1alpha1.SubscriptionStateUpgradePending
		st.CurrentCSV = r.bundle.CSVName
		// Every namespace sync reports the catalogs' health; they served this resolution.
		now := s.now()
		st.SetCondition(v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionCatalogSourcesUnhealthy, Status: corev1.ConditionFalse,
			Reason: "AllCatalogSourcesHealthy", Message: "all available catalogsources are healthy", LastTransitionTime: &now})
	})
}

// updateSubscriptionStatus GETs the Subscription and writes its status with mutate applied,
// retrying on conflict, as updateSubscriptionStatuses does.
func (s *Sim) updateSubscriptionStatus(ctx context.Context, sub *v1alpha1.Subscription, mutate func(*v1alpha1.SubscriptionStatus)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh := &v1alpha1.Subscription{}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
			return err
		}
		mutate(&fresh.Status)
		fresh.Status.LastUpdated = s.now()
		return s.Client.Status().Update(ctx, fresh)
	})
}

func (s *Sim) setConditions(ctx context.Context, subs []*v1alpha1.Subscription, c v1alpha1.SubscriptionCondition) error {
	var errs []error
	for _, sub := range subs {
		errs = append(errs, s.updateSubscriptionStatus(ctx, sub, func(st *v1alpha1.SubscriptionStatus) {
			now := s.now()
			c.LastTransitionTime = &now
			st.SetCondition(c)
		}))
	}
	return errors.Join(errs...)
}

// gcInstallPlans keeps at most five plans per namespace, deleting the oldest generations first.
func (s *Sim) gcInstallPlans(ctx context.Context, ns string) error {
	plans, err := s.listInstallPlans(ctx, ns)
	if err != nil || len(plans) <= maxInstallPlanCount {
		return err
	}
	sort.Slice(plans, func(i, j int) bool { return plans[i].Spec.Generation < plans[j].Spec.Generation })
	for _, ip := range plans[:len(plans)-maxInstallPlanCount] {
		if err := s.Client.Delete(ctx, ip); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

func (s *Sim) listSubscriptions(ctx context.Context, ns string) ([]*v1alpha1.Subscription, error) {
	list := &v1alpha1.SubscriptionList{}
	if err := s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.Subscription, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (s *Sim) listInstallPlans(ctx context.Context, ns string) ([]*v1alpha1.InstallPlan, error) {
	list := &v1alpha1.InstallPlanList{}
	if err := s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := make([]*v1alpha1.InstallPlan, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func appendUnique(list []string, v string) []string {
	for _, x := range list {
		if x == v {
			return list
		}
	}
	return append(list, v)
}
