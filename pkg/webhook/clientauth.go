package webhook

import (
	"net/http"
	"sync"
	"time"

	"github.com/olmguard/olmguard/internal/tlsconfig"
	"github.com/olmguard/olmguard/pkg/metrics"
)

// Reasons of olmguard_webhook_requests_refused_total.
const (
	RefusedUnauthenticated = "unauthenticated"
	RefusedOverloaded      = "overloaded"
)

// clientAuth refuses, with 403 and before any admission logic (no lookup, no LIST), a request
// whose TLS client certificate does not chain to the client CA or whose CommonName is not
// allowed (--client-ca-file, --client-cn-names). A forged AdmissionReview from a pod that
// reaches the port learns nothing: the answer carries no review.
func clientAuth(cas *tlsconfig.ClientCAs, allowed []string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pool, err := cas.Pool()
		if err != nil {
			log(r.Context()).Error(err, "reading the client CA file again")
		}
		if r.TLS == nil {
			refuseUnauthenticated(w, r, "no TLS connection")
			return
		}
		if _, err := tlsconfig.VerifyClient(r.TLS.PeerCertificates, pool, allowed, time.Now()); err != nil {
			refuseUnauthenticated(w, r, err.Error())
			return
		}
		next.ServeHTTP(w, r)
	})
}

func refuseUnauthenticated(w http.ResponseWriter, r *http.Request, why string) {
	metrics.WebhookRequestsRefused.WithLabelValues(RefusedUnauthenticated).Inc()
	// Debug level: a caller that reaches the port could otherwise fill the log.
	log(r.Context()).V(1).Info("refused an unauthenticated admission call", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", why)
	// The reason stays in the log: the caller learns only that it was refused.
	http.Error(w, "forbidden: a client certificate from the webhook's client CA with an allowed CommonName is required", http.StatusForbidden)
}

// maxInflightBodyBytes bounds the review bodies a replica holds at once when
// --max-inflight-requests is on: 64 calls of controller-runtime's largest body (7 MiB) would be
// far above the webhook's 128 MiB memory limit. A call counts for its Content-Length (net/http
// reads no more), or for maxReviewBytes without one; the kube-apiserver always sends one.
const maxInflightBodyBytes = 24 << 20

// inflightLimiter answers 429 at once, without admission logic and without reading the body,
// when max requests are already being handled or their bodies would exceed
// maxInflightBodyBytes (max <= 0: no limit). The kube-apiserver takes the 429 as a failed call
// and applies the webhook's failurePolicy: with Ignore (the default) the object is admitted
// without olmguard's answer, as when olmguard is down, and the controller repairs what it can.
// No Retry-After header: with one, the kube-apiserver's client (client-go) waits and retries, and
// under a flood every OLM write would wait out the webhook's timeout instead of failing fast.
// The returned middleware shares one count among every handler it wraps.
func inflightLimiter(max int) func(http.Handler) http.Handler {
	return newInflight(max, maxInflightBodyBytes).wrap
}

type inflight struct {
	max      int
	maxBytes int64

	mu    sync.Mutex
	calls int
	bytes int64
}

func newInflight(max int, maxBytes int64) *inflight { return &inflight{max: max, maxBytes: maxBytes} }

// acquire reserves one call with a body of n bytes; release gives them back.
func (l *inflight) acquire(n int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	// One call is always let through when none is in flight, whatever its size.
	if l.calls >= l.max || (l.calls > 0 && l.bytes+n > l.maxBytes) {
		return false
	}
	l.calls++
	l.bytes += n
	return true
}

func (l *inflight) release(n int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls--
	l.bytes -= n
}

func (l *inflight) wrap(next http.Handler) http.Handler {
	if l.max <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := r.ContentLength
		if n < 0 || n > maxReviewBytes {
			n = maxReviewBytes
		}
		if !l.acquire(n) {
			metrics.WebhookRequestsRefused.WithLabelValues(RefusedOverloaded).Inc()
			http.Error(w, "too many admission requests in flight", http.StatusTooManyRequests)
			return
		}
		defer l.release(n)
		next.ServeHTTP(w, r)
	})
}
