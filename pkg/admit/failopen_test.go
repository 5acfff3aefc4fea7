package admit

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gomodules.xyz/jsonpatch/v2"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/metrics"
)

func TestFailOpen(t *testing.T) {
	const path = "/test/fail-open"
	for name, tc := range map[string]struct {
		h           admission.HandlerFunc
		allowed     bool
		result      string
		wantWarning bool
	}{
		"allowed": {func(context.Context, admission.Request) admission.Response { return admission.Allowed("") }, true, ResultAllowed, false},
		"patched": {func(context.Context, admission.Request) admission.Response {
			return admission.Patched("", jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/finalizers", Value: []string{"x"}})
		}, true, ResultPatched, false},
		"denied": {func(context.Context, admission.Request) admission.Response { return admission.Denied("no") }, false, ResultDenied, false},
		"errored": {func(context.Context, admission.Request) admission.Response {
			return admission.Errored(500, context.Canceled)
		}, true, ResultError, true},
		"bad request": {func(context.Context, admission.Request) admission.Response {
			return admission.Errored(400, context.Canceled)
		}, true, ResultError, true},
		"panic": {func(context.Context, admission.Request) admission.Response { panic("boom") }, true, ResultError, true},
	} {
		t.Run(name, func(t *testing.T) {
			counter := metrics.WebhookRequests.WithLabelValues(path, tc.result)
			before := testutil.ToFloat64(counter)
			resp := Serve(path, tc.h).Handle(context.Background(), admission.Request{})
			if resp.Allowed != tc.allowed {
				t.Errorf("Allowed = %v, want %v", resp.Allowed, tc.allowed)
			}
			if got := testutil.ToFloat64(counter) - before; got != 1 {
				t.Errorf("counter %s increased by %v, want 1", tc.result, got)
			}
			if (len(resp.Warnings) > 0) != tc.wantWarning {
				t.Errorf("warnings = %v, want some: %v", resp.Warnings, tc.wantWarning)
			}
			if tc.result == ResultError && len(resp.Patches) > 0 {
				t.Error("a failed handler's patches must not be applied")
			}
		})
	}
}

func TestLookupFailed(t *testing.T) {
	counter := metrics.LookupErrors.WithLabelValues("test-lookup")
	before := testutil.ToFloat64(counter)
	resp := LookupFailed(context.Background(), "test-lookup", "Subscriptions", "policies not checked", errors.New("apiserver away"))
	if !resp.Allowed || len(resp.Patches) > 0 || len(resp.Patch) > 0 {
		t.Errorf("response = %+v, want allowed unchanged", resp)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "could not list Subscriptions, policies not checked: apiserver away") {
		t.Errorf("warnings = %q", resp.Warnings)
	}
	if got := testutil.ToFloat64(counter) - before; got != 1 {
		t.Errorf("lookup errors counter increased by %v, want 1", got)
	}
}
