package webhook

import (
	"net/http"
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

// inflightLimiter answers 429 at once, without admission logic, when max requests are already
// being handled (max <= 0: no limit). The kube-apiserver takes the 429 as a failed call and
// applies the webhook's failurePolicy: with Ignore (the default) the object is admitted without
// olmguard's answer, as when olmguard is down, and the controller repairs what it can. No
// Retry-After header: with one, the kube-apiserver's client (client-go) waits and retries, and
// under a flood every OLM write would wait out the webhook's timeout instead of failing fast.
// The returned middleware shares one count among every handler it wraps.
func inflightLimiter(max int) func(http.Handler) http.Handler {
	if max <= 0 {
		return func(next http.Handler) http.Handler { return next }
	}
	slots := make(chan struct{}, max)
	return func(next http.Handler) http.Handler {
		return inflightHandler(slots, next)
	}
}

func inflightHandler(slots chan struct{}, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case slots <- struct{}{}:
		default:
			metrics.WebhookRequestsRefused.WithLabelValues(RefusedOverloaded).Inc()
			http.Error(w, "too many admission requests in flight", http.StatusTooManyRequests)
			return
		}
		defer func() { <-slots }()
		next.ServeHTTP(w, r)
	})
}
