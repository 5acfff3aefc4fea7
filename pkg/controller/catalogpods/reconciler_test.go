package catalogpods_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/olmguard/olmguard/pkg/catalog"
	"github.com/olmguard/olmguard/pkg/controller/catalogpods"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/testenv"
)

var env *testenv.Env

// held counts, by pod name, the decisions the reconciler logged to leave a catalog pod on its
// NotReady node (the outage guard): a held decision is otherwise invisible. It also counts the
// reconciles of each pod that ended without a requeue (controller-runtime's "Reconcile
// successful", logged at V(5); the sink enables every level).
var held = &heldLog{n: map[string]int{}, done: map[string]int{}}

// TestMain runs one control plane and a manager with only this reconciler (grace 2s).
func TestMain(m *testing.M) {
	logf.SetLogger(logr.New(heldSink{log: held}))
	testenv.Main(m, func(e *testenv.Env) (func() error, error) {
		env = e
		o := catalogpods.DefaultOptions()
		o.Grace = 2 * time.Second
		return testenv.RunManager(e.Config, testenv.ManagerOptions(), setup.Controller{CatalogPods: o}.Reconciler(catalogpods.Name))
	})
}

// setNode creates or updates a node with the given readiness; a node whose Ready condition is
// Unknown carries the unreachable taint, as the node lifecycle controller sets it.
func setNode(t *testing.T, ctx context.Context, name string, ready corev1.ConditionStatus) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{catalog.ZoneLabel: "zone-" + name}}}
	if err := env.Client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = nil
	if ready == corev1.ConditionUnknown {
		n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute, TimeAdded: ptr.To(metav1.Now())}}
	}
	if err := env.Client.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, LastTransitionTime: metav1.Now(), LastHeartbeatTime: metav1.Now()}}
	if err := env.Client.Status().Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// catalogSource creates CatalogSource ns/name, or returns the existing one.
func catalogSource(t *testing.T, ctx context.Context, ns, name string) *v1alpha1.CatalogSource {
	t.Helper()
	cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: "registry.example/" + name + ":1"}}
	if err := env.Client.Create(ctx, cs); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cs), cs); err != nil {
			t.Fatal(err)
		}
	}
	return cs
}

// ownedBy is the ownerReference OLM sets on the registry pods of cs (olm-facts §5.2).
func ownedBy(cs *v1alpha1.CatalogSource) []metav1.OwnerReference {
	return []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: cs.Name, UID: cs.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}
}

// catalogPodOn creates a registry pod of CatalogSource ns/cat on node, as OLM does.
func catalogPodOn(t *testing.T, ctx context.Context, ns, node string) *corev1.Pod {
	t.Helper()
	return podOn(t, ctx, ns, node, ownedBy(catalogSource(t, ctx, ns, "cat")))
}

// podOn creates a pod labelled olm.catalogSource=cat on node with the given owners.
func podOn(t *testing.T, ctx context.Context, ns, node string, owners []metav1.OwnerReference) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "cat-", Namespace: ns, Labels: map[string]string{olm.CatalogSourceLabel: "cat"}, OwnerReferences: owners},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "registry-server", Image: "registry.example/cat:1"}}},
	}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

type heldLog struct {
	mu   sync.Mutex
	n    map[string]int
	done map[string]int
}

func (h *heldLog) count(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n[name]
}

func (h *heldLog) reconciled(name string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done[name]
}

// heldSink is a logr.LogSink that records the reconciler's held decisions in a heldLog.
type heldSink struct {
	log    *heldLog
	values []any
}

func (heldSink) Init(logr.RuntimeInfo) {}
func (heldSink) Enabled(int) bool      { return true }
func (s heldSink) Info(_ int, msg string, kv ...any) {
	counts := s.log.n
	switch {
	case strings.HasPrefix(msg, "catalog pod left on its NotReady node"):
	case msg == "Reconcile successful":
		counts = s.log.done
	default:
		return
	}
	all := append(slices.Clone(s.values), kv...)
	for i := 0; i+1 < len(all); i += 2 {
		if name, ok := all[i+1].(string); ok && all[i] == "name" {
			s.log.mu.Lock()
			counts[name]++
			s.log.mu.Unlock()
		}
	}
}
func (heldSink) Error(error, string, ...any) {}
func (s heldSink) WithValues(kv ...any) logr.LogSink {
	return heldSink{log: s.log, values: append(slices.Clone(s.values), kv...)}
}
func (s heldSink) WithName(string) logr.LogSink { return s }

func gone(ctx context.Context, p *corev1.Pod) bool {
	err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

func TestReconciler(t *testing.T) {
	env = testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.Patience)
	defer cancel()
	ns := "olm"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		setNode(t, ctx, n, corev1.ConditionTrue)
	}
	onA, onB := catalogPodOn(t, ctx, ns, "a"), catalogPodOn(t, ctx, ns, "b")
	plain := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "not-a-catalog", Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "a", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}

	// Node a stops: once the 2s grace has passed its catalog pod is deleted, nothing else is.
	setNode(t, ctx, "a", corev1.ConditionUnknown)
	notReady := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		return gone(ctx, onA), nil
	})
	if err != nil {
		t.Fatal("catalog pod on the NotReady node was not deleted")
	}
	// Condition times are stored in whole seconds, so the grace may end up to 1s early.
	if waited := time.Since(notReady); waited < time.Second {
		t.Errorf("deleted %s after NotReady, before the 2s grace", waited)
	}
	if gone(ctx, plain) || gone(ctx, onB) {
		t.Fatal("deleted a pod that is not a catalog pod, or one on a Ready node")
	}

	// More than 55% of the nodes NotReady: nothing is deleted. Node d, which runs no catalog pod,
	// stops first, so the outage is there before the pods of b and c are stranded: the reconciler
	// never starts their grace periods, it holds them back, and until a node turns Ready again it
	// has nothing more to decide about them.
	onC := catalogPodOn(t, ctx, ns, "c")
	for _, n := range []string{"d", "b", "c"} {
		setNode(t, ctx, n, corev1.ConditionFalse)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		if gone(ctx, onB) || gone(ctx, onC) {
			return false, errors.New("deleted catalog pods while most nodes were NotReady")
		}
		return held.count(onB.Name) > 0 && held.count(onC.Name) > 0, nil
	})
	if err != nil {
		t.Fatalf("the stranded pods, held back %d and %d times: %v", held.count(onB.Name), held.count(onC.Name), err)
	}
	if gone(ctx, onB) || gone(ctx, onC) {
		t.Fatal("deleted catalog pods while most nodes were NotReady")
	}
	// Nodes a and d recover (2 of 5 NotReady): the guard lifts and both stranded pods go.
	for _, n := range []string{"a", "d"} {
		setNode(t, ctx, n, corev1.ConditionTrue)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		return gone(ctx, onB) && gone(ctx, onC), nil
	})
	if err != nil {
		t.Fatal("stranded catalog pods not deleted once the outage guard lifted")
	}
}

// A tenant's pods that only look like catalog pods stay on a node that stops responding, while
// the real catalog pods on it and on a second failed node are force-deleted. The look-alikes carry
// the label olm.catalogSource and, for some, an ownerReference a tenant can write: to no
// CatalogSource, to one that does not exist, or to a real one with a forged UID.
// Fails before the fix: the reconciler deleted every pod labelled olm.catalogSource on a NotReady
// node, so the look-alikes went with the real pods.
func TestTenantLookAlikesAreLeftAlone(t *testing.T) {
	env = testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.Patience)
	defer cancel()
	ns := "tenant"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// Ten Ready nodes besides x and y, so that two failed ones are no outage; removed at the end,
	// so the other tests count only their own.
	names := []string{"x", "y"}
	for i := range 10 {
		names = append(names, fmt.Sprintf("healthy-%d", i))
	}
	for _, n := range names {
		setNode(t, ctx, n, corev1.ConditionTrue)
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
	})
	shop := catalogSource(t, ctx, ns, "shop")
	lookAlikes := lookAlikePods(t, ctx, ns, "x", shop)
	realX := podOn(t, ctx, ns, "x", ownedBy(shop))
	realY := podOn(t, ctx, ns, "y", ownedBy(shop))

	setNode(t, ctx, "x", corev1.ConditionUnknown)
	testenv.Eventually(t, "the catalog pod on node x deleted", func(ctx context.Context) (bool, error) {
		return gone(ctx, realX), nil
	})
	// Node y fails only now: its pod's grace ends after every decision about the pods of x was due,
	// and the reconciler works through its queue in order, so once realY is gone each look-alike
	// has been decided on (before the fix: deleted with realX).
	setNode(t, ctx, "y", corev1.ConditionUnknown)
	testenv.Eventually(t, "the catalog pod on node y deleted", func(ctx context.Context) (bool, error) {
		return gone(ctx, realY), nil
	})
	for what, p := range lookAlikes {
		if gone(ctx, p) {
			t.Errorf("deleted a tenant's pod (%s) on the NotReady node", what)
		}
	}
}

// lookAlikePods creates on node the pods a tenant could make look like shop's catalog pods: the
// label only, an owner reference to shop with a forged UID, and one to a CatalogSource that does
// not exist.
func lookAlikePods(t *testing.T, ctx context.Context, ns, node string, shop *v1alpha1.CatalogSource) map[string]*corev1.Pod {
	t.Helper()
	forged := ownedBy(shop)
	forged[0].UID = "0f0f0f0f-0000-4000-8000-000000000000"
	ghost := ownedBy(&v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Name: "ghost", UID: "1e1e1e1e-0000-4000-8000-000000000000"}})
	return map[string]*corev1.Pod{
		"label only":                podOn(t, ctx, ns, node, nil),
		"owner with a forged UID":   podOn(t, ctx, ns, node, forged),
		"owner that does not exist": podOn(t, ctx, ns, node, ghost),
	}
}

// setPodStatus writes the pod's status as a kubelet would.
func setPodStatus(t *testing.T, ctx context.Context, p *corev1.Pod, phase corev1.PodPhase, reason string, conds ...corev1.PodCondition) {
	t.Helper()
	p.Status = corev1.PodStatus{Phase: phase, Reason: reason, Conditions: conds}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// A catalog pod the kubelet evicted on a Ready node (phase Failed, reason Evicted, no
// DisruptionTarget) is deleted so OLM recreates it: OLM keeps it as its registry server (OLM
// #3459, #3519, OCPBUGS-46474). The pod was Running and decided on (left: its node is Ready)
// before its status turned Failed, so only the watch of its status brings it back to the
// reconciler. A tenant's Failed look-alikes on the same node stay, and so does a pod still
// Running with DisruptionTarget=True (the kubelet is terminating it).
// Fails before the fix: the Failed catalog pod on the Ready node was never deleted.
func TestFailedCatalogPodOnReadyNode(t *testing.T) {
	env = testenv.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.Patience)
	defer cancel()
	ns := "evicted"
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	setNode(t, ctx, "f", corev1.ConditionTrue)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "f"}})
	})
	shop := catalogSource(t, ctx, ns, "shop")
	lookAlikes := lookAlikePods(t, ctx, ns, "f", shop)
	disrupted := podOn(t, ctx, ns, "f", ownedBy(shop))
	evicted := podOn(t, ctx, ns, "f", ownedBy(shop))

	before := held.reconciled(evicted.Name)
	setPodStatus(t, ctx, evicted, corev1.PodRunning, "")
	testenv.Eventually(t, "the running catalog pod decided on", func(context.Context) (bool, error) {
		return held.reconciled(evicted.Name) > before, nil
	})
	if gone(ctx, evicted) {
		t.Fatal("deleted a Running catalog pod on a Ready node")
	}

	// The look-alikes and the disrupted pod change first: the reconciler works through its queue
	// in order, so once the evicted catalog pod is gone each of them has been decided on.
	for _, p := range lookAlikes {
		setPodStatus(t, ctx, p, corev1.PodFailed, "Evicted")
	}
	setPodStatus(t, ctx, disrupted, corev1.PodRunning, "",
		corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet", LastTransitionTime: metav1.Now()})
	setPodStatus(t, ctx, evicted, corev1.PodFailed, "Evicted")
	testenv.Eventually(t, "the evicted catalog pod on the Ready node deleted", func(ctx context.Context) (bool, error) {
		return gone(ctx, evicted), nil
	})
	for what, p := range lookAlikes {
		if gone(ctx, p) {
			t.Errorf("deleted a tenant's Failed pod (%s)", what)
		}
	}
	if gone(ctx, disrupted) {
		t.Error("deleted a Running catalog pod with DisruptionTarget=True, which its kubelet is terminating")
	}
	testenv.Eventually(t, "CatalogPodFailedRecovered Event on CatalogSource shop", func(ctx context.Context) (bool, error) {
		events := &eventsv1.EventList{}
		if err := env.Client.List(ctx, events, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, e := range events.Items {
			if e.Reason == catalogpods.EventFailedRecovered && e.Regarding.Name == shop.Name && e.Related != nil && e.Related.Name == evicted.Name {
				return true, nil
			}
		}
		return false, nil
	})
}

// The cache keeps of a catalog pod what the reconciler reads, the phase among it, and nothing of
// a look-alike without a CatalogSource owner. Fails before the fix: the cache held the whole pod
// (containers, status reason and message), more than the reconciler reads.
func TestCachedPodFields(t *testing.T) {
	var trim func(client.Object) client.Object
	for _, k := range catalogpods.CacheNeeds() {
		if _, ok := k.Object.(*corev1.Pod); ok {
			trim = k.Fields.Trim
		}
	}
	cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Name: "cat", UID: "cat-uid"}}
	full := func(owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "olm", Labels: map[string]string{olm.CatalogSourceLabel: "cat"}, OwnerReferences: owners},
			Spec:   corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "registry-server", Image: "registry.example/cat:1"}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: memory."}}
	}
	got := trim(full(ownedBy(cs))).(*corev1.Pod)
	want := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "olm", Labels: map[string]string{olm.CatalogSourceLabel: "cat"}, OwnerReferences: ownedBy(cs)},
		Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("cached catalog pod\n%+v\nwant\n%+v", got, want)
	}
	if got := trim(full(nil)).(*corev1.Pod); got.Status.Phase != "" || got.Labels != nil || got.Spec.NodeName != "" {
		t.Errorf("cached look-alike %+v: want its name only", got)
	}
}
