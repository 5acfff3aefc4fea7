package webhook

import (
	"context"
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

// HandlerFactory builds the handler of one admission path once the manager exists, so a handler
// can read through the manager's cache (mgr.GetClient()) and decode with its scheme.
type HandlerFactory func(mgr manager.Manager) (admission.Handler, error)

// Static wraps a handler that needs nothing from the manager.
func Static(h admission.Handler) HandlerFactory {
	return func(manager.Manager) (admission.Handler, error) { return h, nil }
}

// AllowAll admits every request unchanged: the placeholder of a path with no handler yet.
var AllowAll admission.Handler = admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
})

// Results of the requests counter.
const (
	ResultAllowed = "allowed"
	ResultPatched = "patched"
	ResultDenied  = "denied"
	ResultError   = "error"
)

var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: olmguard.MetricsPrefix + "webhook_requests_total",
		Help: "Admission requests answered by olmguard, by path and result (allowed, patched, denied, error).",
	}, []string{"path", "result"})
	certificateExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: olmguard.MetricsPrefix + "webhook_certificate_expiration_timestamp_seconds",
		Help: "NotAfter of the serving certificate currently loaded, in seconds since the epoch.",
	})
)

func init() {
	ctrlmetrics.Registry.MustRegister(requestsTotal, certificateExpiry)
}

// RequestsTotal returns the counter value for a path and result (tests, diagnostics).
func RequestsTotal(path, result string) float64 {
	c, err := requestsTotal.GetMetricWithLabelValues(path, result)
	if err != nil {
		return 0
	}
	return counterValue(c)
}

// failOpen wraps every handler. It counts the result, and it turns a panic or an error response
// into an allowed response with a warning: the apiserver rejects a request whose answer is "not
// allowed" whatever the failurePolicy, and olmguard must never make OLM worse. Only a deliberate
// denial (403 Forbidden, as admission.Denied returns) reaches the apiserver as a denial.
type failOpen struct {
	path string
	h    admission.Handler
}

func (f failOpen) Handle(ctx context.Context, req admission.Request) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			resp = f.errored(ctx, fmt.Sprintf("panic: %v", r))
		}
	}()
	resp = f.h.Handle(ctx, req)
	switch {
	case !resp.Allowed && resp.Result != nil && resp.Result.Code != 0 && resp.Result.Code != http.StatusForbidden:
		return f.errored(ctx, resp.Result.Message)
	case !resp.Allowed:
		requestsTotal.WithLabelValues(f.path, ResultDenied).Inc()
	case len(resp.Patches) > 0 || len(resp.Patch) > 0:
		requestsTotal.WithLabelValues(f.path, ResultPatched).Inc()
	default:
		requestsTotal.WithLabelValues(f.path, ResultAllowed).Inc()
	}
	return resp
}

func (f failOpen) errored(ctx context.Context, msg string) admission.Response {
	requestsTotal.WithLabelValues(f.path, ResultError).Inc()
	log(ctx).Error(nil, "admission handler failed; allowing the request unchanged", "path", f.path, "error", msg)
	return admission.Allowed("").WithWarnings("olmguard " + f.path + " failed, request admitted unchanged: " + msg)
}
