package mutate

// Admission-path benchmarks with realistic bodies, each beside a baseline written the common way
// (decode the whole object, mutate it, marshal it, diff old and new into a JSON patch with
// admission.PatchResponseFromRaw). `make bench` runs them; docs/performance.md has the results.
// Every benchmark also reports p50 and p99 latencies of its iterations.

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/internal/latency"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/unpack"
)

// bigCSV is a ClusterServiceVersion of about size bytes, shaped like OperatorHub's large ones: a
// base64 icon, a long markdown description, alm-examples, an install strategy and owned CRDs.
func bigCSV(tb testing.TB, size int, finalizers ...string) []byte {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	icon := make([]byte, size/2*3/4)
	for i := range icon {
		icon[i] = byte(rng.IntN(256))
	}
	var desc strings.Builder
	for desc.Len() < size/4 {
		fmt.Fprintf(&desc, "## Section %d\nThe operator manages *widgets* and their `gadgets`; see https://example.com/docs/%d.\n\n", desc.Len(), rng.IntN(1e6))
	}
	examples := make([]map[string]any, 40)
	for i := range examples {
		examples[i] = map[string]any{"apiVersion": "example.com/v1", "kind": fmt.Sprintf("Widget%d", i),
			"metadata": map[string]any{"name": "example"}, "spec": map[string]any{"size": i, "image": "quay.io/example/widget:v1"}}
	}
	alm, _ := json.Marshal(examples)
	owned := make([]map[string]any, 30)
	for i := range owned {
		owned[i] = map[string]any{"name": fmt.Sprintf("widget%ds.example.com", i), "version": "v1", "kind": fmt.Sprintf("Widget%d", i),
			"displayName": "Widget", "description": strings.Repeat("A widget. ", 20)}
	}
	deployments := []map[string]any{{"name": "widget-operator", "spec": map[string]any{"replicas": 1,
		"selector": map[string]any{"matchLabels": map[string]string{"name": "widget-operator"}},
		"template": map[string]any{"metadata": map[string]any{"labels": map[string]string{"name": "widget-operator"}},
			"spec": map[string]any{"serviceAccountName": "widget-operator", "containers": []any{map[string]any{
				"name": "operator", "image": "quay.io/example/widget-operator:v1.2.3", "args": []string{"--leader-elect"}}}}}}}}
	meta := map[string]any{"name": "widget-operator.v1.2.3", "namespace": "operators", "uid": "8b7c0c5e-0000-4000-8000-000000000001",
		"resourceVersion": "123456", "generation": 3,
		"labels":      map[string]string{"olm.managed": "true", "operators.coreos.com/widget-operator.operators": ""},
		"annotations": map[string]string{"alm-examples": string(alm), "capabilities": "Full Lifecycle", "olm.operatorGroup": "global-operators", "olm.operatorNamespace": "operators"}}
	if len(finalizers) > 0 {
		meta["finalizers"] = finalizers
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "metadata": meta,
		"spec": map[string]any{"displayName": "Widget Operator", "version": "1.2.3", "description": desc.String(),
			"icon":                      []any{map[string]any{"base64data": base64.StdEncoding.EncodeToString(icon), "mediatype": "image/png"}},
			"customresourcedefinitions": map[string]any{"owned": owned},
			"install":                   map[string]any{"strategy": "deployment", "spec": map[string]any{"deployments": deployments}}},
		"status": map[string]any{"phase": "Succeeded", "reason": "InstallSucceeded"}})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

const mib = 1 << 20

// baselineCSVHandler adds the finalizer the common way: the whole object decoded, mutated,
// re-encoded and diffed.
type baselineCSVHandler struct{}

func (baselineCSVHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	if slices.Contains(u.GetFinalizers(), olmguard.CleanupFinalizer) {
		return admission.Allowed("")
	}
	u.SetFinalizers(append(u.GetFinalizers(), olmguard.CleanupFinalizer))
	mutated, err := u.MarshalJSON()
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// baselineMetaHandler is the common way for a handler that only touches metadata (Jobs,
// InstallPlans): decode everything, change, diff.
type baselineMetaHandler struct {
	mutate func(*unstructured.Unstructured)
}

func (h baselineMetaHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	h.mutate(u)
	mutated, err := u.MarshalJSON()
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}

// latencies runs handle in the benchmark loop, checks each answer, and reports p50 and p99.
func latencies(b *testing.B, handle func() admission.Response, check func(admission.Response) error) {
	b.Helper()
	b.ReportAllocs()
	var r latency.Recorder
	for b.Loop() {
		var resp admission.Response
		r.Time(func() { resp = handle() })
		if err := check(resp); err != nil {
			b.Fatal(err)
		}
	}
	r.Report(b)
}

func patched(n int) func(admission.Response) error {
	return func(r admission.Response) error {
		if !r.Allowed || len(r.Patches) != n {
			return fmt.Errorf("allowed %v with %d patches, want %d: %v", r.Allowed, len(r.Patches), n, r.Result)
		}
		return nil
	}
}

// BenchmarkAdmissionCSV: a 1 MiB CSV on CREATE (the finalizer is added) and on UPDATE (it is there
// already), olmguard's handler against the baseline.
func BenchmarkAdmissionCSV(b *testing.B) {
	fresh, withFinalizer := bigCSV(b, mib), bigCSV(b, mib, "operators.coreos.com/csv-cleanup", olmguard.CleanupFinalizer)
	b.Logf("CSV body: %d bytes", len(fresh))
	create := csvRequest(admissionv1.Create, fresh)
	update := csvRequest(admissionv1.Update, withFinalizer)
	update.OldObject.Raw = withFinalizer
	for _, h := range []struct {
		name string
		h    admission.Handler
	}{{"olmguard", served(CSVHandler{})}, {"baseline", baselineCSVHandler{}}} {
		b.Run("op=create/impl="+h.name, func(b *testing.B) {
			latencies(b, func() admission.Response { return h.h.Handle(context.Background(), create) }, patched(1))
		})
		b.Run("op=update/impl="+h.name, func(b *testing.B) {
			latencies(b, func() admission.Response { return h.h.Handle(context.Background(), update) }, patched(0))
		})
	}
}

// BenchmarkAdmissionInstallPlan: a 20-step plan in a namespace of 10 Subscriptions (the lookup is
// served from memory: it is measured through the apiserver by the load test).
func BenchmarkAdmissionInstallPlan(b *testing.B) {
	subs := make([]owners.Subscription, 10)
	for i := range subs {
		subs[i] = owners.Subscription{Name: fmt.Sprintf("s%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}
	}
	req := ipRequest(admissionv1.Create, realisticPlan(b), nil)
	ours := served(&InstallPlanHandler{Subscriptions: fakeSubs{subs: subs}})
	baseline := baselineMetaHandler{mutate: func(u *unstructured.Unstructured) {
		refs := u.GetOwnerReferences()
		for _, s := range subs[1:] {
			refs = append(refs, owners.SubscriptionOwnerRef(s.Name, s.UID))
		}
		u.SetOwnerReferences(refs)
	}}
	b.Run("impl=olmguard", func(b *testing.B) {
		latencies(b, func() admission.Response { return ours.Handle(context.Background(), req) }, patched(9))
	})
	b.Run("impl=baseline", func(b *testing.B) {
		latencies(b, func() admission.Response { return baseline.Handle(context.Background(), req) }, func(r admission.Response) error {
			if len(r.Patches) == 0 {
				return fmt.Errorf("baseline made no patch")
			}
			return nil
		})
	})
}

// BenchmarkAdmissionJob: an unpack Job as OLM v0.46 creates it.
func BenchmarkAdmissionJob(b *testing.B) {
	raw := unpackJobJSON(b)
	req := jobRequest(admissionv1.Create, raw)
	ours := served(&JobHandler{TTL: 10 * time.Minute, Catalogs: catalogsIn{namespaces: []string{"olm"}}}) // the lookup is measured through the apiserver
	baseline := baselineMetaHandler{mutate: func(u *unstructured.Unstructured) {
		u.SetName(unpack.ScopedName(u.GetNamespace(), u.GetName()))
		_ = unstructured.SetNestedField(u.Object, int64(600), "spec", "ttlSecondsAfterFinished")
	}}
	b.Run("impl=olmguard", func(b *testing.B) {
		latencies(b, func() admission.Response { return ours.Handle(context.Background(), req) }, patched(2)) // the name, and the TTL OLM left unset
	})
	b.Run("impl=baseline", func(b *testing.B) {
		latencies(b, func() admission.Response { return baseline.Handle(context.Background(), req) }, func(r admission.Response) error {
			if len(r.Patches) == 0 {
				return fmt.Errorf("baseline made no patch")
			}
			return nil
		})
	})
}

// unpackJobJSON is an unpack Job with OLM v0.46's labels, owner, containers and TTL.
func unpackJobJSON(tb testing.TB) []byte {
	tb.Helper()
	name := "8d67f73b77c43214c1f31adf025bfc258a4b6d671a34f339926a897eb6d45c6"
	labels := map[string]string{"olm.managed": "true", "operatorframework.io/bundle-unpack-ref": name}
	container := func(n, image string, cmd ...string) map[string]any {
		return map[string]any{"name": n, "image": image, "command": cmd, "securityContext": map[string]any{"readOnlyRootFilesystem": true,
			"allowPrivilegeEscalation": false, "capabilities": map[string]any{"drop": []string{"ALL"}}},
			"volumeMounts": []any{map[string]any{"name": "bundle", "mountPath": "/bundle"}, map[string]any{"name": "util", "mountPath": "/util"}}}
	}
	b, err := json.Marshal(map[string]any{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]any{"name": name, "namespace": "olm", "labels": labels,
			"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": "c0ffee00-0000-4000-8000-000000000001", "controller": false, "blockOwnerDeletion": false}}},
		"spec": map[string]any{"backoffLimit": 3, "activeDeadlineSeconds": 600, "ttlSecondsAfterFinished": nil,
			"template": map[string]any{"metadata": map[string]any{"name": name, "labels": labels},
				"spec": map[string]any{"restartPolicy": "Never", "serviceAccountName": name, "nodeSelector": map[string]string{"kubernetes.io/os": "linux"},
					"initContainers": []any{container("util", "quay.io/operator-framework/olm:v0.46.0", "/bin/cp", "-Rv", "/bin/cpb", "/util/cpb"),
						container("pull", "quay.io/example/widget-bundle:v1.2.3", "/util/cpb", "/bundle")},
					"containers": []any{container("extract", "quay.io/operator-framework/opm:v1.50.0", "opm", "alpha", "bundle", "extract", "-m", "/bundle/", "-n", "olm", "-c", name, "-z")},
					"volumes":    []any{map[string]any{"name": "bundle", "emptyDir": map[string]any{}}, map[string]any{"name": "util", "emptyDir": map[string]any{}}}}}}})
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
