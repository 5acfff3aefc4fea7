package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/owners"
)

// realisticPlan is an InstallPlan as OLM writes it for an install with 20 steps, owned by the
// namespace's first Subscription.
func realisticPlan(b *testing.B) []byte {
	steps := make([]map[string]any, 20)
	for i := range steps {
		steps[i] = map[string]any{"resolving": "op.v1.0.0", "status": "Unknown", "resource": map[string]any{
			"sourceName": "operatorhubio-catalog", "sourceNamespace": "olm", "group": "rbac.authorization.k8s.io", "version": "v1",
			"kind": "ClusterRole", "name": fmt.Sprintf("op.v1.0.0-%d", i),
			"manifest": `{"kind":"ConfigMap","name":"8d67f73b77c43214c1f31adf025bfc258a4b6d671a34f339926a897eb6d45c6","namespace":"olm","catalogSourceName":"operatorhubio-catalog","catalogSourceNamespace":"olm","replaces":""}`}}
	}
	raw, err := json.Marshal(map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
		"metadata": map[string]any{"generateName": "install-", "namespace": "ns",
			"ownerReferences": []any{owners.SubscriptionOwnerRef("s0", "uid-0")}},
		"spec":   map[string]any{"approval": "Automatic", "approved": true, "clusterServiceVersionNames": []string{"op.v1.0.0"}, "generation": 3},
		"status": map[string]any{"phase": "Installing", "catalogSources": []string{"operatorhubio-catalog"}, "plan": steps},
	})
	if err != nil {
		b.Fatal(err)
	}
	return raw
}

// BenchmarkInstallPlanHandler is the admission path for a 20-step plan in a namespace of 10
// Subscriptions, without the Subscription lookup (served from memory here).
func BenchmarkInstallPlanHandler(b *testing.B) {
	subs := make([]owners.Subscription, 10)
	for i := range subs {
		subs[i] = owners.Subscription{Name: fmt.Sprintf("s%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}
	}
	h := served(&InstallPlanHandler{Subscriptions: fakeSubs{subs: subs}})
	req := ipRequest(admissionv1.Create, realisticPlan(b), nil)
	b.ReportAllocs()
	for b.Loop() {
		if resp := h.Handle(context.Background(), req); len(resp.Patches) != 9 {
			b.Fatalf("want 9 references added, got %d", len(resp.Patches))
		}
	}
}
