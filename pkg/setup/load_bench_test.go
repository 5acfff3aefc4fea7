package setup_test

// Load through a real kube-apiserver (envtest) with olmguard's webhook served in-process: the
// latency a client sees for InstallPlan creates and CSV updates, where the webhook is called and
// where it is not. The "off" runs use olmguard-system, which the webhook configurations exclude,
// on the same apiserver and etcd, so the difference is what olmguard adds. `make bench` runs each
// 2,000 times (-benchtime 2000x); benchstat shows p50 and p99 side by side.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/internal/latency"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/mutate"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/test/builders"
)

var (
	loadSetup sync.Once
	loadErr   error
)

// loadNamespaces are where the webhook is called ("on"), where it is not ("off", and "off-again",
// a second namespace the webhook configurations exclude: the two differ only by chance, which
// shows how precise a difference of percentiles is here), and where it is called but answers
// InstallPlans from Subscriptions it listed once ("on-no-lookup"): the cost of the apiserver
// calling a webhook at all, without olmguard's lookup.
var loadNamespaces = map[string]string{"on": "load", "off": olmguard.DefaultNamespace, "off-again": metav1.NamespaceSystem, "on-no-lookup": noLookupNamespace}

const noLookupNamespace = "load-no-lookup"

// memoSubscriptions lists a namespace's whole Subscriptions live once (so it can answer a CREATE's
// question and an UPDATE's), then answers from memory.
type memoSubscriptions struct {
	admit.Subscriptions // Live: not memoized
	mu                  sync.Mutex
	seen                map[string][]v1alpha1.Subscription
}

func (m *memoSubscriptions) List(ctx context.Context, ns string, _ bool) ([]v1alpha1.Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if subs, ok := m.seen[ns]; ok {
		return subs, nil
	}
	subs, err := m.Subscriptions.List(ctx, ns, false)
	if err == nil {
		m.seen[ns] = subs
	}
	return subs, err
}

// withoutLookupIn serves plans of namespace ns from memoized Subscriptions, others as production.
func withoutLookupIn(ns string, production admit.HandlerFactory) admit.HandlerFactory {
	return func(mgr manager.Manager) (admit.Decider, error) {
		d, err := production(mgr)
		if err != nil {
			return nil, err
		}
		memo := &mutate.InstallPlanHandler{Subscriptions: &memoSubscriptions{Subscriptions: admit.LiveSubscriptions{Reader: mgr.GetAPIReader()}, seen: map[string][]v1alpha1.Subscription{}}}
		return byNamespace{ns: memo, "": d}, nil
	}
}

// loadCSVs is how many CSVs the update load cycles through; each has about 64 KiB of spec.
const loadCSVs = 20

func prepareLoad(ctx context.Context) error {
	loadSetup.Do(func() {
		for _, ns := range []string{"load", noLookupNamespace} {
			if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
				loadErr = err
				return
			}
		}
		for _, ns := range loadNamespaces {
			for i := 0; i < 10 && loadErr == nil; i++ {
				loadErr = createInstalledSubscription(ctx, ns, i)
			}
			for i := 0; i < loadCSVs && loadErr == nil; i++ {
				// Our typed view has no description: the CRD keeps unknown fields, so write it unstructured.
				csv := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
					"metadata": map[string]any{"namespace": ns, "name": fmt.Sprintf("load.v%d", i)},
					"spec":     map[string]any{"displayName": "load", "install": map[string]any{"strategy": "deployment"}, "description": strings.Repeat("A long operator description. ", 64<<10/29)}}}
				loadErr = client.IgnoreAlreadyExists(env.Client.Create(ctx, csv))
			}
		}
	})
	return loadErr
}

// createInstalledSubscription creates Subscription s<i> and gives it the status OLM writes once
// its operator is installed: the health of each of the cluster's four catalogs, the conditions,
// and the references to its CSV and plan (about 3 KB, most of a Subscription's size).
func createInstalledSubscription(ctx context.Context, ns string, i int) error {
	sub := builders.Subscription(ns, fmt.Sprintf("s%d", i), fmt.Sprintf("p%d", i), v1alpha1.ApprovalAutomatic)
	if err := env.Client.Create(ctx, sub); err != nil {
		return client.IgnoreAlreadyExists(err)
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	var health, conditions []any
	for _, c := range []string{"certified-operators", "community-operators", "redhat-marketplace", "redhat-operators"} {
		health = append(health, map[string]any{"healthy": true, "lastUpdated": now, "catalogSourceRef": map[string]any{
			"apiVersion": olm.V1alpha1APIVersion, "kind": olm.CatalogSourceKind, "name": c, "namespace": "openshift-marketplace",
			"resourceVersion": "1234567", "uid": "3c9d2f0e-5b1a-4f7e-9a63-" + fmt.Sprintf("%012d", len(c))}})
	}
	for _, c := range [][3]string{
		{"CatalogSourcesUnhealthy", "AllCatalogSourcesHealthy", "all available catalogsources are healthy"},
		{"BundleUnpacking", "", ""}, {"InstallPlanMissing", "", ""}, {"ResolutionFailed", "", ""}} {
		conditions = append(conditions, map[string]any{"type": c[0], "status": "False", "reason": c[1], "message": c[2], "lastTransitionTime": now})
	}
	plan := map[string]any{"apiVersion": olm.V1alpha1APIVersion, "kind": olm.InstallPlanKind, "name": "install-" + sub.Name, "namespace": ns,
		"resourceVersion": "7654321", "uid": "9f1e7c3a-2d4b-4c8e-8b1f-" + fmt.Sprintf("%012d", i)}
	csv := fmt.Sprintf("p%d.v1.2.%d", i, i)
	status := map[string]any{"status": map[string]any{
		"catalogHealth": health, "conditions": conditions, "currentCSV": csv, "installedCSV": csv,
		"installPlanGeneration": 1, "installPlanRef": plan, "lastUpdated": now, "state": "AtLatestKnown",
		"installplan": map[string]any{"apiVersion": olm.V1alpha1APIVersion, "kind": olm.InstallPlanKind, "name": plan["name"], "uuid": plan["uid"]}}}
	patch, err := json.Marshal(status)
	if err != nil {
		return err
	}
	return env.Client.Status().Patch(ctx, sub, client.RawPatch(types.MergePatchType, patch))
}

// loadModes runs one request in each mode per benchmark iteration, interleaved (the order rotates
// with the iteration), so that the modes share whatever else the machine is doing and the store's
// growth; a mode run after another would be compared with a different machine. request gets the
// namespace, the mode and the iteration number; it returns the request to time and a check of its
// outcome, run outside the timing. Each mode's p50 and p99 are reported as <mode>-p50-ns and
// <mode>-p99-ns, what the webhook adds (on minus off) as added-p50-ns and added-p99-ns, and the
// same difference between off-again and off, which only chance makes, as chance-p50-ns and
// chance-p99-ns. ns/op is the time of one request in every mode.
func loadModes(b *testing.B, modes []string, request func(ns, mode string, i int) (do func() error, check func() error)) {
	if env == nil {
		b.Skip("needs kube-apiserver and etcd")
	}
	if err := prepareLoad(context.Background()); err != nil {
		b.Fatal(err)
	}
	recorders := make(map[string]*latency.Recorder, len(modes))
	for _, mode := range modes {
		recorders[mode] = &latency.Recorder{}
	}
	i := 0
	for b.Loop() {
		for k := range modes {
			mode := modes[(i+k)%len(modes)]
			do, check := request(loadNamespaces[mode], mode, i)
			var err error
			recorders[mode].Time(func() { err = do() })
			if err == nil {
				err = check()
			}
			if err != nil {
				b.Fatalf("%s: %v", mode, err)
			}
		}
		i++
	}
	for _, mode := range modes {
		recorders[mode].ReportAs(b, mode)
	}
	difference := func(name, mode string) {
		for _, p := range []float64{50, 99} {
			d := recorders[mode].Percentile(p) - recorders["off"].Percentile(p)
			b.ReportMetric(float64(d.Nanoseconds()), fmt.Sprintf("%s-p%.0f-ns", name, p))
		}
	}
	difference("added", "on")
	difference("chance", "off-again")
}

// BenchmarkLoadInstallPlanCreate: InstallPlan creates in namespaces with 10 Subscriptions, plans
// written as OLM's createInstallPlan writes them: owned by every Subscription of its live List
// (plan=as-olm, nothing for olmguard to add), or by all but one, as OLM issue #3199 leaves out a
// Subscription created during resolution (plan=missing-owner, olmguard adds it).
func BenchmarkLoadInstallPlanCreate(b *testing.B) {
	for _, missing := range []int{0, 1} {
		b.Run(map[int]string{0: "plan=as-olm", 1: "plan=missing-owner"}[missing], func(b *testing.B) {
			benchmarkInstallPlanCreates(b, missing)
		})
	}
}

func benchmarkInstallPlanCreates(b *testing.B, missing int) {
	ctx := context.Background()
	var created []client.Object
	defer func() {
		for _, o := range created {
			_ = env.Client.Delete(ctx, o)
		}
	}()
	owners := map[string][]metav1.OwnerReference{}
	loadModes(b, []string{"off", "on", "on-no-lookup", "off-again"}, func(ns, mode string, _ int) (func() error, func() error) {
		if owners[ns] == nil {
			refs, err := subscriptionOwners(ctx, ns)
			if err != nil {
				b.Fatal(err)
			}
			owners[ns] = refs
		}
		ip := builders.InstallPlan(ns)
		ip.OwnerReferences = slices.Clone(owners[ns][:len(owners[ns])-missing])
		return func() error { return env.Client.Create(ctx, ip) }, func() error {
			created = append(created, ip)
			want := len(owners[ns])
			if !strings.HasPrefix(mode, "on") {
				want -= missing
			}
			if len(ip.OwnerReferences) != want {
				return fmt.Errorf("plan has %d owners, want %d", len(ip.OwnerReferences), want)
			}
			return nil
		}
	})
}

// subscriptionOwners are the ownerReferences OLM gives a plan for the namespace's Subscriptions
// (ownerutil.AddNonBlockingOwner).
func subscriptionOwners(ctx context.Context, ns string) ([]metav1.OwnerReference, error) {
	var subs v1alpha1.SubscriptionList
	if err := env.Client.List(ctx, &subs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	refs := make([]metav1.OwnerReference, 0, len(subs.Items))
	for _, s := range subs.Items {
		refs = append(refs, owners.SubscriptionOwnerRef(s.Name, s.UID))
	}
	return refs, nil
}

// BenchmarkLoadCSVUpdate: metadata updates of CSVs that carry olmguard's finalizer, as OLM and
// users make them all the time. The apiserver evaluates the webhooks' matchConditions and, the
// finalizer being there, does not call olmguard.
func BenchmarkLoadCSVUpdate(b *testing.B) {
	ctx := context.Background()
	loadModes(b, []string{"off", "on", "off-again"}, func(ns, mode string, i int) (func() error, func() error) {
		csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("load.v%d", i%loadCSVs)}}
		patch := fmt.Appendf(nil, `{"metadata":{"annotations":{"load/n":"%d"}}}`, i)
		return func() error { return env.Client.Patch(ctx, csv, client.RawPatch(types.MergePatchType, patch)) }, func() error {
			if has := hasCleanupFinalizer(csv); has != (mode == "on") {
				return fmt.Errorf("CSV %s finalizers %v in mode %s", csv.Name, csv.Finalizers, mode)
			}
			return nil
		}
	})
}

func hasCleanupFinalizer(csv *v1alpha1.ClusterServiceVersion) bool {
	for _, f := range csv.Finalizers {
		if f == olmguard.CleanupFinalizer {
			return true
		}
	}
	return false
}

var (
	benchSetup sync.Once
	benchErr   error
)

// BenchmarkLiveSubscriptionLookup measures the webhook's per-plan lookup from a local
// kube-apiserver in a namespace with 10 installed Subscriptions: an InstallPlan CREATE's, which
// lists metadata only (read=metadata), and an UPDATE's, which lists whole Subscriptions for their
// installPlanRef (read=full; before, CREATEs read this way too), beside a GET of a Namespace.
func BenchmarkLiveSubscriptionLookup(b *testing.B) {
	if env == nil {
		b.Skip("needs kube-apiserver and etcd")
	}
	ctx := context.Background()
	ns := "bench-lookup"
	benchSetup.Do(func() {
		benchErr = env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		for i := 0; i < 10 && benchErr == nil; i++ {
			benchErr = createInstalledSubscription(ctx, ns, i)
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	l := admit.LiveSubscriptions{Reader: env.Client}
	read := func(full bool) func() error {
		return func() error {
			subs, err := l.List(ctx, ns, !full)
			if err == nil && (len(subs) != 10 || (subs[0].Status.InstallPlanRef != nil) != full) {
				err = fmt.Errorf("read %d Subscriptions: %+v", len(subs), subs)
			}
			return err
		}
	}
	for _, r := range []struct {
		name string
		read func() error
	}{
		{"read=metadata", read(false)},
		{"read=full", read(true)},
		// The cheapest request there is, for scale: what any request costs on this apiserver.
		{"read=namespace-get", func() error { return env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) }},
	} {
		b.Run(r.name, func(b *testing.B) {
			var rec latency.Recorder
			for b.Loop() {
				var err error
				rec.Time(func() { err = r.read() })
				if err != nil {
					b.Fatal(err)
				}
			}
			rec.Report(b)
		})
	}
}
