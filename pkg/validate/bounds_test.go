package validate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// cappedCount reads olmguard_webhook_reads_capped_total{webhook} from the registry by name (0
// when it does not exist).
func cappedCount(t *testing.T, webhook string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "olmguard_webhook_reads_capped_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			if labelOf(m, "webhook") == webhook {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// manySubscriptions are n Automatic Subscriptions sub-i of packages pkg-i in namespace ns.
func manySubscriptions(n int) []client.Object {
	out := make([]client.Object, n)
	for i := range out {
		s := sub(fmt.Sprintf("sub-%d", i), fmt.Sprintf("pkg-%d", i), v1alpha1.ApprovalAutomatic)
		out[i] = &s
	}
	return out
}

// Enforced policies with many Subscriptions in the namespace. Up to the lookup's cap (1,000) the
// duplicate-package policy decides; past it the lookup stops: the request is allowed unchanged
// with a warning, and counted in olmguard_webhook_reads_capped_total{webhook} (and in the lookup
// errors), so a namespace of objects a tenant created can cost the webhook no more than the cap.
// The owner-drop policy reads only the Subscriptions the plan named, and decides at any count.
//
// Fails before the fix: every Subscription was read and kept, whatever their number: with 1,001
// the duplicate was still denied after reading them all, and no cap was counted.
func TestEnforcedPoliciesAtTheLookupCap(t *testing.T) {
	p := DefaultPolicies()
	p.DuplicatePackage, p.InstallPlanOwnerDrop = Enforce, Enforce
	dup := sub("dup", "pkg-0", v1alpha1.ApprovalAutomatic)
	for _, tc := range []struct {
		subs   int
		capped bool
	}{{200, false}, {1001, true}} {
		reader := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(manySubscriptions(tc.subs)...).Build()}
		subs := admit.LiveSubscriptions{Reader: reader}
		for _, h := range []struct {
			webhook string
			h       admission.Handler
			req     admission.Request
			capped  bool
		}{
			{SubscriptionsWebhook, served(&SubscriptionHandler{Subscriptions: subs, Policies: p}), request(t, "Subscription", admissionv1.Create, dup, nil), tc.capped},
			{InstallPlansWebhook, served(&InstallPlanHandler{Subscriptions: subs, Policies: p}), dropsSub0(t), false},
		} {
			before := cappedCount(t, h.webhook)
			r := h.h.Handle(context.Background(), h.req)
			counted := cappedCount(t, h.webhook) - before
			if !h.capped {
				if r.Allowed || counted != 0 {
					t.Errorf("%s with %d Subscriptions: allowed=%v, %v capped reads counted; want denied by the enforced policy, none counted", h.webhook, tc.subs, r.Allowed, counted)
				}
				continue
			}
			if !r.Allowed || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "too many") || counted != 1 {
				t.Errorf("%s with %d Subscriptions: allowed=%v warnings %q, %v capped reads counted; want allowed unchanged with a warning, counted once", h.webhook, tc.subs, r.Allowed, r.Warnings, counted)
			}
		}
	}
}

// dropsSub0 is an InstallPlan update that drops Subscription sub-0's ownerReference.
func dropsSub0(t *testing.T) admission.Request {
	ref0 := metav1.OwnerReference{APIVersion: "operators.coreos.com/v1alpha1", Kind: "Subscription", Name: "sub-0", UID: types.UID("uid-sub-0")}
	return request(t, "InstallPlan", admissionv1.Update,
		map[string]any{"metadata": map[string]any{"name": "install-1", "namespace": "ns"}},
		map[string]any{"metadata": map[string]any{"name": "install-1", "namespace": "ns", "ownerReferences": []metav1.OwnerReference{ref0}}})
}

// The owner-drop policy reads the dropped Subscription by name and lists nothing: what it costs
// does not grow with the Subscriptions a tenant creates in the namespace (the hostile tier's
// flood of 200 Subscriptions of 900 KB each made a list outlast the lookup, and the policy fail
// open).
//
// Fails before the fix: the handler listed the namespace's Subscriptions (1 list, no get).
func TestOwnerDropReadsOnlyTheNamedSubscriptions(t *testing.T) {
	p := DefaultPolicies()
	p.InstallPlanOwnerDrop = Enforce
	reader := &countingReader{Reader: fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(manySubscriptions(300)...).Build()}
	h := served(&InstallPlanHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader}, Policies: p})
	if r := h.Handle(context.Background(), dropsSub0(t)); r.Allowed {
		t.Errorf("dropping live sub-0 was allowed: %+v", r)
	}
	if reader.lists != 0 || reader.gets != 1 {
		t.Errorf("the owner check made %d lists and %d gets; want no list and one get", reader.lists, reader.gets)
	}
}

// countingReader counts the reads it passes on.
type countingReader struct {
	client.Reader
	lists, gets int
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.lists++
	return r.Reader.List(ctx, list, opts...)
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	r.gets++
	return r.Reader.Get(ctx, key, obj, opts...)
}
