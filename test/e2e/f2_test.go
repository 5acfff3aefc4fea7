package e2e

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// observer records every state of a namespace's Subscriptions and InstallPlans from watches, so
// a state that lasts microseconds (Installing -> Complete) is seen, which no poll can promise.
type observer struct {
	mu      sync.Mutex
	history map[string][]string // "subscription/<name>" or "installplan/<name>" -> distinct states in order
	changed chan struct{}
}

func observe(ctx context.Context, t *testing.T, c *cluster.Cluster, ns string) *observer {
	t.Helper()
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	o := &observer{history: map[string][]string{}, changed: make(chan struct{}, 1)}
	for _, list := range []client.ObjectList{&v1alpha1.SubscriptionList{}, &v1alpha1.InstallPlanList{}} {
		w, err := wc.Watch(ctx, list, client.InNamespace(ns))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		go func() {
			for ev := range w.ResultChan() {
				switch obj := ev.Object.(type) {
				case *v1alpha1.Subscription:
					o.record("subscription/"+obj.Name, subState(obj))
				case *v1alpha1.InstallPlan:
					state := "phase=" + string(obj.Status.Phase)
					if ev.Type == watch.Deleted {
						state = "deleted"
					}
					o.record("installplan/"+obj.Name, state)
				}
			}
		}()
	}
	return o
}

// subState is a Subscription's InstallPlan conditions as "Type/Reason" sorted, or "none".
func subState(s *v1alpha1.Subscription) string {
	var parts []string
	for _, typ := range drift.PlanTypes {
		if c := s.Status.GetCondition(typ); c != nil && c.Status == corev1.ConditionTrue {
			parts = append(parts, string(typ)+"/"+c.Reason)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

func (o *observer) record(key, state string) {
	o.mu.Lock()
	h := o.history[key]
	if len(h) == 0 || h[len(h)-1] != state {
		o.history[key] = append(h, state)
	}
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

func (o *observer) states(key string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.history[key])
}

// waitFor waits until the last recorded state of key is state.
func (o *observer) waitFor(ctx context.Context, t *testing.T, key, state string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, testenv.Patience)
	defer cancel()
	for {
		h := o.states(key)
		if len(h) > 0 && h[len(h)-1] == state {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s never reached %q; states seen: %v", key, state, h)
		case <-o.changed:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// driftEvents returns the olmguard drift Events of one object, with reason.
func driftEvents(ctx context.Context, t *testing.T, c *cluster.Cluster, ns, name, reason string) []corev1.Event {
	t.Helper()
	list := &corev1.EventList{}
	if err := c.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, e := range list.Items {
		if (name == "" || e.InvolvedObject.Name == name) && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

func eventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// TestF2TransitionsWithoutFalseAlarm walks one Subscription through every row of OLM's mapping,
// the way OLM's own e2e test does, with olmguard's controller running and a 2s drift window: the
// watch-based observer sees every plan phase, including Installing -> Complete faster than any
// poll, and OLM keeping up raises no drift alarm and no nudge.
func TestF2TransitionsWithoutFalseAlarm(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const window = 2 * time.Second
	startController(t, c, "--drift-window="+window.String())
	sim, cat, ns := olmNamespace(t, ctx, c, "f2-walk")
	obs := observe(ctx, t, c, ns)

	if _, err := sim.CreateOperatorGroup(ctx, ns, "og"); err != nil {
		t.Fatal(err)
	}
	sub, err := sim.CreateSubscription(ctx, ns, "alpha", cat, "alpha", v1alpha1.ApprovalAutomatic)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := sim.Install(ctx, ns, true)
	if err != nil {
		t.Fatal(err)
	}
	subKey, planKey := "subscription/"+sub.Name, "installplan/"+plan.Name
	obs.waitFor(ctx, t, subKey, "none")

	// As OLM's "can reconcile InstallPlan status" test: make the plan Manual, then force phases.
	if err := c.Client.Patch(ctx, plan, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approval":"Manual","approved":false}}`))); err != nil {
		t.Fatal(err)
	}
	setStatus := func(phase v1alpha1.InstallPlanPhase, conds ...v1alpha1.InstallPlanCondition) {
		t.Helper()
		ip := &v1alpha1.InstallPlan{}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(plan), ip); err != nil {
			t.Fatal(err)
		}
		ip.Status.Phase, ip.Status.Conditions = phase, conds
		if err := c.Client.Status().Update(ctx, ip); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		phase v1alpha1.InstallPlanPhase
		conds []v1alpha1.InstallPlanCondition
		want  string
	}{
		{v1alpha1.InstallPlanPhaseNone, nil, "InstallPlanPending/InstallPlanNotYetReconciled"},
		{v1alpha1.InstallPlanPhaseRequiresApproval, nil, "InstallPlanPending/RequiresApproval"},
		{v1alpha1.InstallPlanPhasePlanning, nil, "InstallPlanPending/Planning"},
	}
	for _, s := range steps {
		setStatus(s.phase, s.conds...)
		obs.waitFor(ctx, t, subKey, s.want)
	}
	// Installing: OLM executes the plan at once (its steps are present) and completes it, the
	// switch behind OLM's flakes #2645 and #3151.
	setStatus(v1alpha1.InstallPlanPhaseInstalling)
	if err := sim.ExecutePlan(ctx, ns, plan.Name); err != nil {
		t.Fatal(err)
	}
	obs.waitFor(ctx, t, planKey, "phase=Complete")
	obs.waitFor(ctx, t, subKey, "none")
	for _, s := range []struct {
		conds []v1alpha1.InstallPlanCondition
		want  string
	}{
		{nil, "InstallPlanFailed/InstallPlanFailed"},
		{[]v1alpha1.InstallPlanCondition{{Type: v1alpha1.InstallPlanInstalled, Status: corev1.ConditionFalse,
			Reason: v1alpha1.InstallPlanReasonComponentFailed, Message: "a component failed"}}, "InstallPlanFailed/InstallComponentFailed"},
	} {
		setStatus(v1alpha1.InstallPlanPhaseFailed, s.conds...)
		obs.waitFor(ctx, t, subKey, s.want)
	}
	if err := c.Client.Delete(ctx, plan); err != nil {
		t.Fatal(err)
	}
	obs.waitFor(ctx, t, subKey, "InstallPlanMissing/ReferencedInstallPlanNotFound")

	planStates := obs.states(planKey)
	t.Logf("plan states: %v", planStates)
	t.Logf("subscription states: %v", obs.states(subKey))
	i := slices.Index(planStates, "phase=Installing")
	if i < 0 || i+1 >= len(planStates) || planStates[i+1] != "phase=Complete" {
		t.Errorf("the observer missed Installing -> Complete: %v", planStates)
	}
	// A false alarm would come one window after a disagreement the reconciler saw, with a nudge:
	// once it reported a drift that began after the last state above, it has had its chance.
	driftHandledUpTo(t, ctx, c)
	if evs := driftEvents(ctx, t, c, ns, "", subscriptiondrift.ReasonDrift); len(evs) > 0 {
		t.Errorf("false drift alarm while OLM kept up: %s", evs[0].Message)
	}
	fresh := &v1alpha1.Subscription{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
		t.Fatal(err)
	}
	if v, ok := fresh.Annotations[olmguard.ResyncAnnotation]; ok {
		t.Errorf("Subscription nudged (%s=%s) although OLM kept up", olmguard.ResyncAnnotation, v)
	}
}

// TestF2StaleSubscriptionDetectedAndNudged: OLM issue #3199 leaves the interleaved Subscription out
// of its plan's owners; the plan completes and only the owner is told. olmguard's drift reconciler
// (alone, so the F1 reconciler does not repair first) reports it one window later, adds the
// ownerReference, and nudges; OLM then corrects the condition.
func TestF2StaleSubscriptionDetectedAndNudged(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const window = 5 * time.Second
	startController(t, c, "--controllers="+subscriptiondrift.Name, "--drift-window="+window.String())
	sim, cat, ns := olmNamespace(t, ctx, c, "f2-stale")
	obs := observe(ctx, t, c, ns)

	r, err := scenario.ReplayStaleSubscription(ctx, sim, cat, ns)
	if err != nil {
		t.Fatal(err)
	}
	if r.Owned() {
		t.Fatal("the replay did not reproduce #3199")
	}
	autoKey := "subscription/" + r.Auto.Name
	stale := r.Stale
	obs.waitFor(ctx, t, "installplan/"+r.Plan.Name, "phase=Complete")
	obs.waitFor(ctx, t, "subscription/"+r.Manual.Name, "none") // the owner was told

	var reported time.Time
	testenv.Eventually(t, "drift reported", func(ctx context.Context) (bool, error) {
		evs := driftEvents(ctx, t, c, ns, r.Auto.Name, subscriptiondrift.ReasonDrift)
		if len(evs) > 0 {
			reported = eventTime(evs[0])
			t.Logf("event: %s", evs[0].Message)
		}
		return len(evs) > 0, nil
	})
	latency := reported.Sub(stale)
	t.Logf("stale at %s, reported %s later (window %s)", stale.Format(time.StampMilli), latency.Round(10*time.Millisecond), window)
	// Not before the window (event times have microsecond precision, the stale time is taken a
	// moment after the condition went stale); how much later depends on the machine.
	if latency < window-time.Second {
		t.Errorf("reported %s after the condition went stale, before the %s window", latency, window)
	}
	obs.waitFor(ctx, t, autoKey, "none")
	fresh := &v1alpha1.Subscription{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(r.Auto), fresh); err != nil {
		t.Fatal(err)
	}
	if fresh.Annotations[olmguard.ResyncAnnotation] == "" {
		t.Errorf("the stale Subscription was never nudged")
	}
	ip := &v1alpha1.InstallPlan{}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(r.Plan), ip); err != nil {
		t.Fatal(err)
	}
	if !scenario.OwnedBy(ip, r.Auto.UID) {
		t.Errorf("the drift's F1 cause was not repaired: owners %v", ip.OwnerReferences)
	}
	testenv.Eventually(t, "drift announced resolved", func(ctx context.Context) (bool, error) {
		return len(driftEvents(ctx, t, c, ns, r.Auto.Name, subscriptiondrift.ReasonDriftResolved)) > 0, nil
	})
	t.Logf("subscription %s states: %v", r.Auto.Name, obs.states(autoKey))
}

// driftHandledUpTo is a barrier for the drift reconciler: it writes a Subscription in drift in a
// namespace of its own (its status names a plan that does not exist, so OLM would report
// InstallPlanMissing) and waits until the reconciler has reported and nudged it, one window after
// it first saw it. The reconciler works through its queue in order and looks again at a drift
// when its window ends, so by then it has acted on every disagreement it saw before, one window
// later: a false alarm about those would have come already.
func driftHandledUpTo(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	ns := c.FreshNamespace(ctx, t, "f2-marker")
	sub := builders.Subscription(ns, "marker", "marker", v1alpha1.ApprovalAutomatic)
	if err := c.Client.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	sub.Status.InstallPlanRef = &corev1.ObjectReference{APIVersion: olm.V1alpha1APIVersion, Kind: olm.InstallPlanKind, Namespace: ns, Name: "nowhere"}
	sub.Status.LastUpdated = metav1.Now()
	if err := c.Client.Status().Update(ctx, sub); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "marker drift reported and nudged", func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKeyFromObject(sub), sub)
		return sub.Annotations[olmguard.ResyncAnnotation] != "", err
	})
}
