package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/olmguard/olmguard/internal/tlsconfig"
	"github.com/olmguard/olmguard/internal/tlsconfig/tlstest"
	"github.com/olmguard/olmguard/pkg/metrics"
)

// TestClientAuth: a call without a certificate of the client CA with an allowed CommonName is
// answered 403 and counted, and the admission handler never runs.
func TestClientAuth(t *testing.T) {
	ca, other := tlstest.NewCA(t, "client-ca"), tlstest.NewCA(t, "other")
	path := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(path, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	cas, err := tlsconfig.LoadClientCAs(path)
	if err != nil {
		t.Fatal(err)
	}
	refused := metrics.WebhookRequestsRefused.WithLabelValues(RefusedUnauthenticated)
	for _, tc := range []struct {
		name    string
		tls     *tls.ConnectionState
		allowed []string
		pass    bool
	}{
		{name: "the apiserver", tls: state(ca.Issue(t, "kube-apiserver", time.Time{}).Cert), allowed: []string{"kube-apiserver"}, pass: true},
		{name: "any name allowed", tls: state(ca.Issue(t, "someone", time.Time{}).Cert), allowed: []string{}, pass: true},
		{name: "plain HTTP", allowed: []string{"kube-apiserver"}},
		{name: "TLS without a certificate", tls: state(), allowed: []string{"kube-apiserver"}},
		{name: "another CommonName", tls: state(ca.Issue(t, "mallory", time.Time{}).Cert), allowed: []string{"kube-apiserver"}},
		{name: "another CA", tls: state(other.Issue(t, "kube-apiserver", time.Time{}).Cert), allowed: []string{"kube-apiserver"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran := false
			h := clientAuth(cas, tc.allowed, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { ran = true }))
			r := httptest.NewRequest(http.MethodPost, "/mutate/installplans", strings.NewReader(`{}`))
			r.TLS = tc.tls
			w := httptest.NewRecorder()
			before := testutil.ToFloat64(refused)
			h.ServeHTTP(w, r)
			if ran != tc.pass {
				t.Errorf("handler ran: %v, want %v", ran, tc.pass)
			}
			if tc.pass {
				return
			}
			if w.Code != http.StatusForbidden {
				t.Errorf("status %d, want 403", w.Code)
			}
			if got := testutil.ToFloat64(refused) - before; got != 1 {
				t.Errorf("refused count rose by %v, want 1", got)
			}
		})
	}
}

func state(peer ...*x509.Certificate) *tls.ConnectionState {
	return &tls.ConnectionState{HandshakeComplete: true, PeerCertificates: peer}
}

// TestInflightLimit: with max calls being handled, one more is answered 429 at once and
// counted, and the slots are shared by every wrapped path; once a call ends, the next is served.
func TestInflightLimit(t *testing.T) {
	overloaded := metrics.WebhookRequestsRefused.WithLabelValues(RefusedOverloaded)
	limit := inflightLimiter(2)
	release := make(chan struct{})
	var entered sync.WaitGroup
	block := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { entered.Done(); <-release })
	a, b := limit(block), limit(block)
	var done sync.WaitGroup
	for _, h := range []http.Handler{a, b} {
		entered.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
		}()
	}
	entered.Wait()
	before := testutil.ToFloat64(overloaded)
	w := httptest.NewRecorder()
	ran := false
	limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	// No Retry-After: the kube-apiserver's client would wait and retry instead of failing fast.
	if ran || w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "" {
		t.Errorf("third call: ran %v, status %d, Retry-After %q", ran, w.Code, w.Header().Get("Retry-After"))
	}
	if got := testutil.ToFloat64(overloaded) - before; got != 1 {
		t.Errorf("overloaded count rose by %v, want 1", got)
	}
	close(release)
	done.Wait()
	w = httptest.NewRecorder()
	limit(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })).ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	if !ran || w.Code != http.StatusOK {
		t.Errorf("after the calls ended: ran %v, status %d", ran, w.Code)
	}
	// No cap.
	ran = false
	inflightLimiter(0)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true })).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	if !ran {
		t.Error("--max-inflight-requests=0 refused a call")
	}
}

// TestInflightBodyBytes: past the body budget a call is refused even with call slots free; a call
// without a Content-Length counts as the largest body; the first call always passes.
func TestInflightBodyBytes(t *testing.T) {
	l := newInflight(10, 100)
	for _, step := range []struct {
		n    int64
		want bool
	}{
		{1000, true}, // alone: let through whatever its size
		{1, false},
	} {
		if got := l.acquire(step.n); got != step.want {
			t.Fatalf("acquire(%d) = %v, want %v", step.n, got, step.want)
		}
	}
	l.release(1000)
	for _, step := range []struct {
		n    int64
		want bool
	}{{60, true}, {50, false}, {40, true}, {1, false}} {
		if got := l.acquire(step.n); got != step.want {
			t.Errorf("acquire(%d) with %d bytes held = %v, want %v", step.n, l.bytes, got, step.want)
		}
	}

	// Through the handler: three held calls of 7 MiB (a larger length counts as 7 MiB, the most
	// that is read) leave no room for one without a length, and room for 1 MiB.
	lim := newInflight(64, maxInflightBodyBytes)
	entered, release := make(chan struct{}, 3), make(chan struct{})
	holder := lim.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	defer close(release)
	for _, n := range []int64{maxReviewBytes, maxReviewBytes, 20 << 20} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(""))
		r.ContentLength = n
		go holder.ServeHTTP(httptest.NewRecorder(), r)
		<-entered
	}
	probe := lim.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, tc := range []struct {
		length int64
		want   int
	}{{-1, http.StatusTooManyRequests}, {4 << 20, http.StatusTooManyRequests}, {1 << 20, http.StatusOK}} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(""))
		r.ContentLength = tc.length
		w := httptest.NewRecorder()
		probe.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("Content-Length %d beside 21 MiB held: status %d, want %d", tc.length, w.Code, tc.want)
		}
	}
}
