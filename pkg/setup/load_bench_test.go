package setup_test

// Load through a real kube-apiserver (envtest) with olmguard's webhook served in-process: the
// latency a client sees for InstallPlan creates and CSV updates, where the webhook is called and
// where it is not. The "off" runs use olmguard-system, which the webhook configurations exclude,
// on the same apiserver and etcd, so the difference is what olmguard adds. `make bench` runs each
// 2,000 times (-benchtime 2000x); benchstat shows p50 and p99 side by side.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/internal/latency"
	"github.com/olmguard/olmguard/pkg/mutate"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/webhook"
)

var (
	loadSetup sync.Once
	loadErr   error
)

// loadNamespaces are where the webhook is called ("on"), where it is not ("off"), and where it
// is called but answers InstallPlans from Subscriptions it listed once ("on-no-lookup"): the cost
// of the apiserver calling a webhook at all, without olmguard's lookup.
var loadNamespaces = map[string]string{"on": "load", "off": olmguard.DefaultNamespace, "on-no-lookup": noLookupNamespace}

const noLookupNamespace = "load-no-lookup"

// memoSubscriptions lists a namespace's Subscriptions live once, then answers from memory.
type memoSubscriptions struct {
	live mutate.SubscriptionLister
	mu   sync.Mutex
	seen map[string][]mutate.Subscription
}

func (m *memoSubscriptions) Subscriptions(ctx context.Context, ns string) ([]mutate.Subscription, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if subs, ok := m.seen[ns]; ok {
		return subs, nil
	}
	subs, err := m.live.Subscriptions(ctx, ns)
	if err == nil {
		m.seen[ns] = subs
	}
	return subs, err
}

// withoutLookupIn serves plans of namespace ns from memoized Subscriptions, others as production.
func withoutLookupIn(ns string, production webhook.HandlerFactory) webhook.HandlerFactory {
	return func(mgr manager.Manager) (admission.Handler, error) {
		h, err := production(mgr)
		if err != nil {
			return nil, err
		}
		memo := &mutate.InstallPlanHandler{Subscriptions: &memoSubscriptions{live: mutate.LiveSubscriptions{Reader: mgr.GetAPIReader()}, seen: map[string][]mutate.Subscription{}}}
		return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
			if req.Namespace == ns {
				return memo.Handle(ctx, req)
			}
			return h.Handle(ctx, req)
		}), nil
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
				loadErr = client.IgnoreAlreadyExists(env.Client.Create(ctx, newSubscription(ns, fmt.Sprintf("s%d", i), fmt.Sprintf("p%d", i), v1alpha1.ApprovalAutomatic)))
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

// loadModes runs request once per benchmark iteration in each mode, timing it, and reports the
// percentiles. request gets the namespace, the mode and the iteration number; it returns the
// request to time and a check of its outcome, run outside the timing.
func loadModes(b *testing.B, modes []string, request func(ns, mode string, i int) (do func() error, check func() error)) {
	if env == nil {
		b.Skip("needs kube-apiserver and etcd")
	}
	if err := prepareLoad(context.Background()); err != nil {
		b.Fatal(err)
	}
	for _, mode := range modes {
		b.Run("webhook="+mode, func(b *testing.B) {
			var r latency.Recorder
			i := 0
			for b.Loop() {
				do, check := request(loadNamespaces[mode], mode, i)
				var err error
				r.Time(func() { err = do() })
				if err == nil {
					err = check()
				}
				if err != nil {
					b.Fatal(err)
				}
				i++
			}
			r.Report(b)
		})
	}
}

// BenchmarkLoadInstallPlanCreate: InstallPlan creates in a namespace with 10 Subscriptions.
func BenchmarkLoadInstallPlanCreate(b *testing.B) {
	ctx := context.Background()
	var created []client.Object
	loadModes(b, []string{"off", "on", "on-no-lookup"}, func(ns, mode string, _ int) (func() error, func() error) {
		ip := newPlan(ns)
		return func() error { return env.Client.Create(ctx, ip) }, func() error {
			created = append(created, ip)
			if want := map[string]int{"on": 10, "on-no-lookup": 10, "off": 0}[mode]; len(ip.OwnerReferences) != want {
				return fmt.Errorf("plan has %d owners, want %d", len(ip.OwnerReferences), want)
			}
			return nil
		}
	})
	for _, o := range created {
		_ = env.Client.Delete(ctx, o)
	}
}

// BenchmarkLoadCSVUpdate: metadata updates of CSVs that carry olmguard's finalizer, as OLM and
// users make them all the time. The apiserver evaluates the webhooks' matchConditions and, the
// finalizer being there, does not call olmguard.
func BenchmarkLoadCSVUpdate(b *testing.B) {
	ctx := context.Background()
	loadModes(b, []string{"off", "on"}, func(ns, mode string, i int) (func() error, func() error) {
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
