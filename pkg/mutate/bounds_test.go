package mutate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	jsonpatch "gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/patchtest"
)

// F1 with many Subscriptions in the namespace: up to the lookup's cap (1,000) a new plan gets
// every one as an owner; past it the plan is admitted unchanged with a warning, counted as a
// lookup error (the controller repairs the plan), so a namespace of objects a tenant created
// costs the webhook no more than the cap.
//
// Fails before the fix: the 1,001 Subscriptions were read and kept, and the plan patched with
// 1,001 owners.
func TestInstallPlanOwnersAtTheLookupCap(t *testing.T) {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		subs   int
		capped bool
	}{{200, false}, {1001, true}} {
		objs := make([]client.Object, tc.subs)
		for i := range objs {
			objs[i] = &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("sub-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		}
		h := served(&InstallPlanHandler{Subscriptions: admit.LiveSubscriptions{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()}})
		counter := metrics.LookupErrors.WithLabelValues(InstallPlansWebhook)
		before := testutil.ToFloat64(counter)
		resp := h.Handle(context.Background(), ipRequest(admissionv1.Create, patchtest.PlanJSON(t, nil), nil))
		errs := testutil.ToFloat64(counter) - before
		switch {
		case !tc.capped && (owned(resp.Patches) != tc.subs || errs != 0):
			t.Errorf("%d Subscriptions: %d owners patched in, %v lookup errors; want every one, no error", tc.subs, owned(resp.Patches), errs)
		case tc.capped && (!resp.Allowed || len(resp.Patches) > 0 || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "too many") || errs != 1):
			t.Errorf("%d Subscriptions: allowed=%v, %d patch operations, warnings %q, %v lookup errors; want admitted unchanged with a warning, counted",
				tc.subs, resp.Allowed, len(resp.Patches), resp.Warnings, errs)
		}
	}
}

// owned counts the ownerReferences the patch adds to a plan that had none.
func owned(ops []jsonpatch.JsonPatchOperation) int {
	n := 0
	for _, op := range ops {
		if refs, ok := op.Value.([]metav1.OwnerReference); ok {
			n += len(refs)
		} else if refs, ok := op.Value.([]any); ok {
			n += len(refs)
		} else if op.Value != nil {
			n++
		}
	}
	return n
}
