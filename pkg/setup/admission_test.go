package setup_test

import (
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
)

// The configurations kustomize installs are the admission table's: `make manifests` renders the
// chart's template, generated from the table, into manifests/base, and this fails when someone
// forgot (charts.CheckSync checks the rest of the tree).
func TestManifestFileIsUpToDate(t *testing.T) {
	wantM, wantV := registration.Build(registration.DefaultOptions(), admit.Webhooks(setup.DefaultWebhook().Admission()))
	b, err := os.ReadFile("../../manifests/base/webhook-configurations.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var gotM admissionregistrationv1.MutatingWebhookConfiguration
	var gotV admissionregistrationv1.ValidatingWebhookConfiguration
	docs := strings.Split(string(b), "\n---\n")
	if len(docs) != 2 {
		t.Fatalf("manifests/base/webhook-configurations.yaml holds %d documents, want 2", len(docs))
	}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), &gotM); err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &gotV); err != nil {
		t.Fatal(err)
	}
	if gotM.Name != wantM.Name || gotV.Name != wantV.Name || !cmp.Equal(gotM.Webhooks, wantM.Webhooks) || !cmp.Equal(gotV.Webhooks, wantV.Webhooks) {
		t.Errorf("manifests/base/webhook-configurations.yaml is stale: run `make manifests`\n%s\n%s",
			cmp.Diff(wantM.Webhooks, gotM.Webhooks), cmp.Diff(wantV.Webhooks, gotV.Webhooks))
	}
}

// servedAt is d bound to the rules of path's endpoint in the admission table, as the server
// serves it.
func servedAt(t testing.TB, path string, d admit.Decider) admission.Handler {
	t.Helper()
	for _, e := range setup.DefaultWebhook().Admission() {
		if e.Path == path {
			h, err := d.For(e.Rules)
			if err != nil {
				t.Fatal(err)
			}
			return h
		}
	}
	t.Fatalf("no admission path %s", path)
	return nil
}

// hook is what both webhook kinds share, for table-driven checks.
type hook struct {
	name, path      string
	clientConfig    admissionregistrationv1.WebhookClientConfig
	rules           []admissionregistrationv1.RuleWithOperations
	failurePolicy   admissionregistrationv1.FailurePolicyType
	sideEffects     admissionregistrationv1.SideEffectClass
	timeout         int32
	versions        []string
	namespaceSel    *metav1.LabelSelector
	objectSel       *metav1.LabelSelector
	matchConditions []admissionregistrationv1.MatchCondition
}

func hooks(o registration.Options) map[string]hook {
	m, v := registration.Build(o, admit.Webhooks(setup.DefaultWebhook().Admission()))
	out := map[string]hook{}
	path := func(cc admissionregistrationv1.WebhookClientConfig) string {
		if cc.Service != nil {
			return *cc.Service.Path
		}
		u, err := url.Parse(*cc.URL)
		if err != nil {
			return ""
		}
		return u.Path
	}
	for _, w := range m.Webhooks {
		out[w.Name] = hook{w.Name, path(w.ClientConfig), w.ClientConfig, w.Rules, *w.FailurePolicy, *w.SideEffects, *w.TimeoutSeconds,
			w.AdmissionReviewVersions, w.NamespaceSelector, w.ObjectSelector, w.MatchConditions}
	}
	for _, w := range v.Webhooks {
		out[w.Name] = hook{w.Name, path(w.ClientConfig), w.ClientConfig, w.Rules, *w.FailurePolicy, *w.SideEffects, *w.TimeoutSeconds,
			w.AdmissionReviewVersions, w.NamespaceSelector, w.ObjectSelector, w.MatchConditions}
	}
	return out
}

func TestBuildConfigurations(t *testing.T) {
	m, v := registration.Build(registration.DefaultOptions(), admit.Webhooks(setup.DefaultWebhook().Admission()))
	if m.Name != olmguard.MutatingWebhookConfigurationName || v.Name != olmguard.ValidatingWebhookConfigurationName {
		t.Errorf("names = %s, %s", m.Name, v.Name)
	}
	for _, l := range []map[string]string{m.Labels, v.Labels} {
		if l[olmguard.NameLabel] != olmguard.Name {
			t.Errorf("labels = %v, want %s=%s", l, olmguard.NameLabel, olmguard.Name)
		}
	}
	if len(m.Webhooks) != 5 || len(v.Webhooks) != 6 {
		t.Fatalf("got %d mutating and %d validating webhooks, want 5 and 6", len(m.Webhooks), len(v.Webhooks))
	}
	for _, w := range m.Webhooks {
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
			t.Errorf("%s: reinvocationPolicy %v, want Never", w.Name, w.ReinvocationPolicy)
		}
	}
}

func TestBuildCommonFields(t *testing.T) {
	o := registration.DefaultOptions()
	o.Namespace = "guard"
	wantNS := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "guard"},
	}}}
	// The reachability probe's webhook is sent objects of olmguard's namespace only.
	wantOwnNS := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"guard"},
	}}}
	hs := hooks(o)
	if len(hs) != 11 {
		t.Fatalf("got %d distinct webhook names, want 11", len(hs))
	}
	var paths []string
	for name, h := range hs {
		t.Run(name, func(t *testing.T) {
			if h.failurePolicy != admissionregistrationv1.Ignore {
				t.Errorf("failurePolicy = %s, want Ignore", h.failurePolicy)
			}
			if h.sideEffects != admissionregistrationv1.SideEffectClassNone {
				t.Errorf("sideEffects = %s, want None", h.sideEffects)
			}
			if h.timeout < 1 || h.timeout > 5 {
				t.Errorf("timeoutSeconds = %d, want small", h.timeout)
			}
			if !slices.Equal(h.versions, []string{"v1"}) {
				t.Errorf("admissionReviewVersions = %v, want [v1]", h.versions)
			}
			want := wantNS
			if name == "webhook-probe.mutate.olmguard.io" {
				want = wantOwnNS
			}
			if diff := cmp.Diff(want, h.namespaceSel); diff != "" {
				t.Errorf("namespaceSelector (-want +got):\n%s", diff)
			}
			if h.objectSel == nil {
				t.Error("objectSelector is nil; the apiserver defaults it to {} and Apply would never converge")
			}
			svc := h.clientConfig.Service
			if svc == nil || svc.Namespace != "guard" || svc.Name != olmguard.WebhookServiceName || *svc.Port != registration.DefaultServicePort || h.clientConfig.URL != nil {
				t.Errorf("clientConfig = %+v, want the Service", h.clientConfig)
			}
			for _, r := range h.rules {
				for _, res := range r.Resources {
					if strings.Contains(res, "/") || res == "*" {
						t.Errorf("rule resource %q: subresources and wildcards must not be sent", res)
					}
				}
			}
		})
		paths = append(paths, h.path)
	}
	slices.Sort(paths)
	want := admit.Paths(setup.DefaultWebhook().Admission())
	slices.Sort(want)
	if !slices.Equal(paths, want) {
		t.Errorf("paths = %v, want %v", paths, want)
	}
}

func TestBuildPerWebhook(t *testing.T) {
	hs := hooks(registration.DefaultOptions())
	ops := func(o ...admissionregistrationv1.OperationType) []admissionregistrationv1.OperationType { return o }
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	for _, tc := range []struct {
		name, path, group, version, resource string
		ops                                  []admissionregistrationv1.OperationType
		objectSel                            []metav1.LabelSelectorRequirement
		conditions                           []string // substrings expected in the CEL expressions, in order
	}{
		{
			name: "installplans.mutate.olmguard.io", path: olmguard.MutateInstallPlansPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "installplans", ops: ops(create, update),
		},
		{
			name: "clusterserviceversions.mutate.olmguard.io", path: olmguard.MutateClusterServiceVersionsPath,
			// Copies are left out by a matchCondition, not an object selector, so that an update
			// removing the finalizer of a CSV labelled as a copy earlier is still sent (issue 31
			// item 7). Fails before the fix: the object selector was there. One condition, in which
			// a finalized CSV labelled as a copy without the tracking label is also sent (issue 32).
			group: "operators.coreos.com", version: "v1alpha1", resource: "clusterserviceversions", ops: ops(create, update),
			conditions: []string{"'olm.copiedFrom' in object.metadata.labels) || (oldObject != null && has(oldObject.metadata.finalizers) && 'olmguard.io/cleanup' in oldObject.metadata.finalizers)) && " +
				"!has(object.metadata.deletionTimestamp) && !(has(object.metadata.finalizers) && 'olmguard.io/cleanup' in object.metadata.finalizers) && " +
				"(!has(object.metadata.annotations) || !('olmguard.io/cleanup' in object.metadata.annotations) || object.metadata.annotations['olmguard.io/cleanup'] != 'disabled')) || " +
				"(has(object.metadata.labels) && 'olm.copiedFrom' in object.metadata.labels && has(object.metadata.finalizers) && 'olmguard.io/cleanup' in object.metadata.finalizers && !('olmguard.io/cleanup-tracked' in object.metadata.labels))"},
		},
		{
			name: "jobs.mutate.olmguard.io", path: olmguard.MutateJobsPath,
			group: "batch", version: "v1", resource: "jobs", ops: ops(create),
			objectSel: []metav1.LabelSelectorRequirement{
				{Key: "operatorframework.io/bundle-unpack-ref", Operator: metav1.LabelSelectorOpExists},
				{Key: "olm.managed", Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}},
			},
		},
		{
			// OLM #3607: only OLM's ServiceAccount updates are sent.
			name: "serviceaccounts.mutate.olmguard.io", path: olmguard.MutateServiceAccountsPath,
			group: "", version: "v1", resource: "serviceaccounts", ops: ops(update),
			conditions: []string{"request.userInfo.username.startsWith('system:serviceaccount:') && request.userInfo.username.endsWith(':olm-operator-serviceaccount')"},
		},
		{
			// The reachability probe: only dry runs of marked ConfigMaps (in olmguard's namespace:
			// TestBuildCommonFields).
			name: "webhook-probe.mutate.olmguard.io", path: olmguard.MutateWebhookProbePath,
			group: "", version: "v1", resource: "configmaps", ops: ops(create),
			objectSel:  []metav1.LabelSelectorRequirement{{Key: "olmguard.io/webhook-probe", Operator: metav1.LabelSelectorOpExists}},
			conditions: []string{"request.dryRun"},
		},
		{
			name: "subscriptions.validate.olmguard.io", path: olmguard.ValidateSubscriptionsPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "subscriptions", ops: ops(create, update),
		},
		{
			name: "catalogsources.validate.olmguard.io", path: olmguard.ValidateCatalogSourcesPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "catalogsources", ops: ops(create, update),
		},
		{
			name: "operatorgroups.validate.olmguard.io", path: olmguard.ValidateOperatorGroupsPath,
			group: "operators.coreos.com", version: "v1", resource: "operatorgroups", ops: ops(create, update),
		},
		{
			name: "installplans.validate.olmguard.io", path: olmguard.ValidateInstallPlansPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "installplans", ops: ops(update),
		},
		{
			name: "clusterserviceversions.validate.olmguard.io", path: olmguard.ValidateClusterServiceVersionsPath,
			// No object selector: with one on olm.copiedFrom, labelling a guarded CSV as a copy
			// first made the apiserver skip the finalizer removal that followed (issue 31 item 7).
			// Fails before the fix: the validating webhook had that selector.
			group: "operators.coreos.com", version: "v1alpha1", resource: "clusterserviceversions", ops: ops(update),
			conditions: []string{"'olmguard.io/cleanup' in oldObject.metadata.finalizers && !(has(object.metadata.finalizers) && 'olmguard.io/cleanup' in object.metadata.finalizers)"},
		},
		{
			name: "clusterserviceversions-replaces.validate.olmguard.io", path: olmguard.ValidateCSVReplacesPath,
			// Creates with a spec.replaces, and updates that change it or drop olm.copiedFrom: never
			// OLM's finalizer and annotation updates.
			group: "operators.coreos.com", version: "v1alpha1", resource: "clusterserviceversions", ops: ops(create, update),
			conditions: []string{"object.spec.replaces != '' && (oldObject == null || !has(oldObject.spec) || !has(oldObject.spec.replaces) || oldObject.spec.replaces != object.spec.replaces || (has(oldObject.metadata.labels) && 'olm.copiedFrom' in oldObject.metadata.labels"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, ok := hs[tc.name]
			if !ok {
				t.Fatal("missing")
			}
			if h.path != tc.path {
				t.Errorf("path = %s, want %s", h.path, tc.path)
			}
			wantRules := []admissionregistrationv1.RuleWithOperations{{
				Operations: tc.ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups: []string{tc.group}, APIVersions: []string{tc.version}, Resources: []string{tc.resource},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope),
				},
			}}
			if diff := cmp.Diff(wantRules, h.rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.objectSel, h.objectSel.MatchExpressions); diff != "" {
				t.Errorf("objectSelector (-want +got):\n%s", diff)
			}
			if len(h.matchConditions) != len(tc.conditions) {
				t.Fatalf("got %d matchConditions, want %d: %+v", len(h.matchConditions), len(tc.conditions), h.matchConditions)
			}
			for i, c := range h.matchConditions {
				if c.Name == "" || !strings.Contains(c.Expression, tc.conditions[i]) {
					t.Errorf("matchCondition %d = %+v, want an expression containing %q", i, c, tc.conditions[i])
				}
			}
		})
	}
}

func TestBuildURLAndCABundle(t *testing.T) {
	o := registration.DefaultOptions()
	o.URL = "https://127.0.0.1:9443/"
	o.CABundle = []byte("ca")
	for name, h := range hooks(o) {
		cc := h.clientConfig
		if cc.Service != nil || cc.URL == nil || *cc.URL != "https://127.0.0.1:9443"+h.path {
			t.Errorf("%s: clientConfig = %+v, want URL https://127.0.0.1:9443%s", name, cc, h.path)
		}
		if string(cc.CABundle) != "ca" {
			t.Errorf("%s: caBundle = %q", name, cc.CABundle)
		}
	}
}
