package admit

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/metrics"
)

// Results of olmguard_webhook_requests_total.
const (
	ResultAllowed = "allowed"
	ResultPatched = "patched"
	ResultDenied  = "denied"
	ResultError   = "error"
)

// Serve wraps the handler of path. It counts every answer by result, and it turns a panic or an
// error response into an allowed response with a warning: the apiserver rejects a request whose
// answer is "not allowed" whatever the failurePolicy.
func Serve(path string, h admission.Handler) admission.Handler {
	return failOpen{path: path, h: h}
}

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
		metrics.WebhookRequests.WithLabelValues(f.path, ResultDenied).Inc()
	case len(resp.Patches) > 0 || len(resp.Patch) > 0:
		metrics.WebhookRequests.WithLabelValues(f.path, ResultPatched).Inc()
	default:
		metrics.WebhookRequests.WithLabelValues(f.path, ResultAllowed).Inc()
	}
	return resp
}

func (f failOpen) errored(ctx context.Context, msg string) admission.Response {
	metrics.WebhookRequests.WithLabelValues(f.path, ResultError).Inc()
	logf.FromContext(ctx).WithName("webhook").Error(nil, "admission handler failed; allowing the request unchanged", "path", f.path, "error", msg)
	return admission.Allowed("").WithWarnings("olmguard " + f.path + " failed, request admitted unchanged: " + msg)
}

// LookupFailedWarning begins the warning of every admission a failed lookup left unchanged.
const LookupFailedWarning = "olmguard: could not list "

// LookupFailed is the answer of every handler whose lookup failed: the request is admitted
// unchanged, the error logged and counted for webhook, and the writer warned that what (the
// lookup) failed and what is left undone.
//
// A lookup that stopped at its bound (ErrCapped: more objects than one lookup considers) is such
// a failure too, also counted in olmguard_webhook_reads_capped_total.
func LookupFailed(ctx context.Context, webhook, what, leftUndone string, err error) admission.Response {
	metrics.LookupErrors.WithLabelValues(webhook).Inc()
	msg := "lookup failed; allowing the request unchanged"
	if errors.Is(err, ErrCapped) {
		metrics.ReadsCapped.WithLabelValues(webhook).Inc()
		msg = "lookup capped; allowing the request unchanged"
	}
	logf.FromContext(ctx).WithName("webhook").Info(msg, "webhook", webhook, "lookup", what, "error", err.Error())
	return admission.Allowed("").WithWarnings(fmt.Sprintf("%s%s, %s: %v", LookupFailedWarning, what, leftUndone, err))
}
