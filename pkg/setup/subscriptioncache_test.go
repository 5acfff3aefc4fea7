package setup_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/validate"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/testenv"
)

// recorded is one request to the apiserver and the bytes of its response body.
type recorded struct {
	path, query, accept string
	bytes               int
}

// metadata reports whether the request asked for metadata only.
func (r recorded) metadata() bool { return strings.Contains(r.accept, "as=PartialObjectMetadata") }

// recorder records every request for Subscriptions but watches made through a rest.Config it
// wraps (discovery is not recorded).
type recorder struct {
	mu   sync.Mutex
	reqs []recorded
}

func (r *recorder) config(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return testenv.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(req)
			if err != nil || req.URL.Query().Get("watch") == "true" || !strings.Contains(req.URL.Path, "/subscriptions") {
				return resp, err
			}
			rec := recorded{path: req.URL.Path, query: req.URL.RawQuery, accept: req.Header.Get("Accept")}
			resp.Body = &countingBody{ReadCloser: resp.Body, done: func(n int) {
				rec.bytes = n
				r.mu.Lock()
				r.reqs = append(r.reqs, rec)
				r.mu.Unlock()
			}}
			return resp, nil
		})
	}
	return cfg
}

// take returns the requests recorded since the last take.
func (r *recorder) take() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reqs
	r.reqs = nil
	return out
}

type countingBody struct {
	io.ReadCloser
	n    int
	once sync.Once
	done func(int)
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n += n
	return n, err
}

func (b *countingBody) Close() error {
	b.once.Do(func() { b.done(b.n) })
	return b.ReadCloser.Close()
}

// The webhook's Subscription lookups with a namespace of large Subscriptions (30 of 1 MiB, the
// size issue 31 item 4 measured with 200): an enforced duplicate-package and mixed-approval policy
// still deny, each decision reads only metadata pages and GETs just the Subscriptions the cache
// does not hold at the listed resourceVersion, and a Subscription created the moment before a
// request is seen by it (the cache alone could miss it). The cache fills itself in pages of 10.
//
// Fails before the fix: the lookups listed whole Subscriptions, 10 to a page (30 MiB per
// decision, three full pages), which the request assertions below refuse; with 200 such
// Subscriptions that read did not fit the 2 s lookup budget and every such policy failed open.
func TestLargeSubscriptionsDecideFromCache(t *testing.T) {
	requireEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := testenv.Namespace(t, env.Client, "large-subs")
	const subs = 30 // 1 MiB each (builders.LargeSubscription)
	big := func(name, pkg, approval string) *unstructured.Unstructured {
		return builders.LargeSubscription(ns, name, pkg, approval)
	}
	for i := range subs {
		if err := env.Client.Create(ctx, big(fmt.Sprintf("sub-%d", i), fmt.Sprintf("pkg-%d", i), "Automatic")); err != nil {
			t.Fatal(err)
		}
	}

	// The webhook's cache and live reader (webhook.New's options), each through a recorder.
	var fill, reads recorder
	c, err := cache.New(fill.config(env.Config), admit.WithSubscriptionCache(cache.Options{Scheme: env.Scheme}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(ctx, &v1alpha1.Subscription{}, cache.BlockUntilSynced(false)); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("cache never synced")
	}
	filled := fill.take()
	if len(filled) < subs/10 {
		t.Errorf("cache fill made %d list requests, want at least %d pages of 10", len(filled), subs/10)
	}
	for _, r := range filled {
		if !strings.Contains(r.query, "limit=10") || strings.Contains(r.query, "resourceVersion=0") {
			t.Errorf("cache fill request %s?%s: want pages of 10 read consistently", r.path, r.query)
		}
	}
	testenv.Eventually(t, "the cache holds every Subscription trimmed", func(ctx context.Context) (bool, error) {
		list := &v1alpha1.SubscriptionList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, s := range list.Items {
			if s.ResourceVersion == "" || s.Spec.Package == "" {
				t.Fatalf("cached Subscription %s lost its resourceVersion or package: %+v", s.Name, s)
			}
		}
		return len(list.Items) == subs, nil
	})
	reader, err := client.New(reads.config(env.Config), client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	sh := &validate.SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader, Cache: c},
		Policies: validate.Policies{DuplicatePackage: validate.Enforce, MixedApproval: validate.Enforce}}
	h := servedAt(t, olmguard.ValidateSubscriptionsPath, sh)
	decide := func(name, pkg string, approval v1alpha1.Approval) admission.Response {
		t.Helper()
		raw, err := json.Marshal(&v1alpha1.Subscription{TypeMeta: metav1.TypeMeta{APIVersion: "operators.coreos.com/v1alpha1", Kind: "Subscription"},
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1alpha1.SubscriptionSpec{Package: pkg, InstallPlanApproval: approval}})
		if err != nil {
			t.Fatal(err)
		}
		return h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Namespace: ns, Name: name, Operation: admissionv1.Create,
			Kind: metav1.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "Subscription"}, Object: runtime.RawExtension{Raw: raw}}})
	}
	// checkReads: only metadata pages (admit.DefaultMetadataPageSize), individual GETs of every name in must and of none
	// but those in must and may.
	checkReads := func(what string, must, may []string) {
		t.Helper()
		got := map[string]bool{}
		for _, r := range reads.take() {
			name, single := strings.CutPrefix(r.path, "/apis/operators.coreos.com/v1alpha1/namespaces/"+ns+"/subscriptions/")
			switch {
			case single:
				got[name] = true
			case r.metadata() && strings.Contains(r.query, fmt.Sprintf("limit=%d", admit.DefaultMetadataPageSize)):
			default:
				t.Errorf("%s: request %s?%s (Accept %s, %d bytes): want metadata pages of %d and single GETs only", what, r.path, r.query, r.accept, r.bytes, admit.DefaultMetadataPageSize)
			}
		}
		for _, name := range must {
			if !got[name] {
				t.Errorf("%s: no GET of %s, which the cache does not hold", what, name)
			}
		}
		for _, name := range append(must, may...) {
			delete(got, name)
		}
		for name := range got {
			t.Errorf("%s: GET of %s, which the cache holds", what, name)
		}
	}

	resp := decide("dup", "pkg-7", v1alpha1.ApprovalAutomatic)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "already has Subscription sub-7") {
		t.Errorf("duplicate package: allowed=%v %q; want denied", resp.Allowed, resp.Result.Message)
	}
	checkReads("duplicate package", nil, nil)
	resp = decide("manual", "pkg-manual", v1alpha1.ApprovalManual)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "are not") {
		t.Errorf("mixed approval: allowed=%v %q; want denied", resp.Allowed, resp.Result.Message)
	}
	checkReads("mixed approval", nil, nil)

	// Consistency: a Subscription created, then at once a duplicate of its package. The
	// consistent metadata list sees it; the cache may not hold it yet, and then it is read whole.
	fresh := big("fresh", "pkg-fresh", "Automatic")
	if err := env.Client.Create(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	resp = decide("fresh-dup", "pkg-fresh", v1alpha1.ApprovalAutomatic)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "already has Subscription fresh") {
		t.Errorf("duplicate of a Subscription created just before: allowed=%v %q; want denied", resp.Allowed, resp.Result.Message)
	}
	checkReads("just created", nil, []string{"fresh"})
	// The same with a cache that has not received it yet, every time: it is read whole, alone.
	sh.Subscriptions = admit.LiveSubscriptions{Reader: reader, Cache: lagging{Reader: c, missing: "fresh"}}
	resp = decide("fresh-dup", "pkg-fresh", v1alpha1.ApprovalAutomatic)
	if resp.Allowed || !strings.Contains(resp.Result.Message, "already has Subscription fresh") {
		t.Errorf("duplicate of a Subscription the cache lacks: allowed=%v %q; want denied", resp.Allowed, resp.Result.Message)
	}
	checkReads("not yet in the cache", []string{"fresh"}, nil)
}

// lagging is a cache that has not yet received one Subscription.
type lagging struct {
	client.Reader
	missing string
}

func (l lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key.Name == l.missing {
		return apierrors.NewNotFound(v1alpha1.GroupVersion.WithResource("subscriptions").GroupResource(), key.Name)
	}
	return l.Reader.Get(ctx, key, obj, opts...)
}
