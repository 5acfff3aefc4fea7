package setup_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/test/testenv"
)

// csvReads records the controller's requests for CSVs.
type csvReads struct {
	mu   sync.Mutex
	seen []url.Values
}

func (r *csvReads) wrap(rt http.RoundTripper) http.RoundTripper {
	return testenv.RoundTripFunc(func(req *http.Request) (*http.Response, error) {
		if strings.HasSuffix(req.URL.Path, "/clusterserviceversions") {
			r.mu.Lock()
			r.seen = append(r.seen, req.URL.Query())
			r.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

// checkPagedCSVLists (issue 32, item 3): the controller's CSV informer filled itself with
// consistent pages of pageSize, never with one list at resourceVersion 0 (which the apiserver
// answers whole from its watch cache, ignoring the limit) nor a watch-list stream whose bound
// depends on the apiserver. Fails without internal/pagedlist: client-go 1.35+ asks for a
// watch-list stream (sendInitialEvents=true) and reads no page at all. The periodic audit's own
// reads, in pages of their own size, are not counted as the cache's, but must be pages too.
func checkPagedCSVLists(t *testing.T, reads *csvReads, pageSize int64, cached int) {
	t.Helper()
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
		if q.Get("limit") == "" || q.Get("resourceVersion") != "" || q.Get("resourceVersionMatch") != "" {
			t.Errorf("CSV list %v: want a page (a limit) and a consistent read (no resourceVersion)", q)
		}
		// The cache's list of its first selection; the audit reads the same selection in smaller pages.
		if q.Get("labelSelector") != cacheneeds.NotOLMCopies.String() || q.Get("limit") != fmt.Sprint(pageSize) {
			continue
		}
		pages++
		if pages > 1 && q.Get("continue") == "" {
			t.Errorf("CSV list page %d without a continue token: %v", pages, q)
		}
	}
	if pageSize <= 0 {
		t.Fatalf("page size %d: the controller's caches must list in pages", pageSize)
	}
	if want := (cached + int(pageSize) - 1) / int(pageSize); pages < want {
		t.Errorf("%d CSV list requests, want at least %d pages of %d for %d CSVs", pages, want, pageSize, cached)
	}
}
