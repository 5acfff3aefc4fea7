package setup_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/testenv"
)

// csvReads records the controller's requests for CSVs.
type csvReads struct {
	mu   sync.Mutex
	seen []url.Values
}

func (r *csvReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/clusterserviceversions") {
			r.mu.Lock()
			r.seen = append(r.seen, req.URL.Query())
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestControllerCachesListInPages (issue 32, item 3): the controller's CSV informer fills itself
// with consistent pages of --cache-list-page-size, never with one list at resourceVersion 0 (which
// the apiserver answers whole from its watch cache, ignoring the limit) nor a watch-list stream
// whose bound depends on the apiserver. Fails without internal/pagedlist: client-go 1.35+ asks
// for a watch-list stream (sendInitialEvents=true) and reads no page at all.
func TestControllerCachesListInPages(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	ns := namespace(t, "cache-pages")
	const csvs, pageSize = 25, 10
	for i := range csvs {
		c := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("paged-%d.v1.0.0", i)},
			Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: "paged", InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}}}
		if err := env.Client.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	reads := &csvReads{}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(reads.wrap)
	o := testenv.ManagerOptions()
	o.CacheListPageSize = pageSize
	// Every reconciler but the periodic audit, whose own paged reads (not the cache's) would mix in.
	o.Controllers = []string{"installplan-owners", "subscription-drift", "csv-cleanup", "unpack-jobs", "catalog-pods"}
	mgr, err := controller.NewManager(cfg, o, setup.DefaultController().Reconcilers()...)
	if err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the controller's caches never synced")
	}
	list := &v1alpha1.ClusterServiceVersionList{}
	if err := mgr.GetCache().List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) < csvs {
		t.Fatalf("%d CSVs in the cache, want at least %d", len(list.Items), csvs)
	}
	reads.mu.Lock()
	defer reads.mu.Unlock()
	pages := 0
	for _, q := range reads.seen {
		if q.Get("watch") == "true" {
			if q.Get("sendInitialEvents") == "true" {
				t.Errorf("a watch-list stream (%v): its bound depends on the apiserver", q)
			}
			continue
		}
		pages++
		if q.Get("limit") != fmt.Sprint(pageSize) || q.Get("resourceVersion") != "" || q.Get("resourceVersionMatch") != "" {
			t.Errorf("CSV list %v: want limit=%d and a consistent read (no resourceVersion)", q, pageSize)
		}
		if pages > 1 && q.Get("continue") == "" {
			t.Errorf("CSV list page %d without a continue token: %v", pages, q)
		}
	}
	if want := (len(list.Items) + pageSize - 1) / pageSize; pages < want {
		t.Errorf("%d CSV list requests, want at least %d pages of %d", pages, want, pageSize)
	}
}
