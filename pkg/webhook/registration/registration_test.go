package registration

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

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

func hooks(o Options) map[string]hook {
	m, v := Build(o)
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
	m, v := Build(DefaultOptions())
	if m.Name != olmguard.MutatingWebhookConfigurationName || v.Name != olmguard.ValidatingWebhookConfigurationName {
		t.Errorf("names = %s, %s", m.Name, v.Name)
	}
	for _, l := range []map[string]string{m.Labels, v.Labels} {
		if l[olmguard.NameLabel] != olmguard.Name {
			t.Errorf("labels = %v, want %s=%s", l, olmguard.NameLabel, olmguard.Name)
		}
	}
	if len(m.Webhooks) != 3 || len(v.Webhooks) != 3 {
		t.Fatalf("got %d mutating and %d validating webhooks, want 3 and 3", len(m.Webhooks), len(v.Webhooks))
	}
	for _, w := range m.Webhooks {
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy {
			t.Errorf("%s: reinvocationPolicy %v, want Never", w.Name, w.ReinvocationPolicy)
		}
	}
}

func TestBuildCommonFields(t *testing.T) {
	o := DefaultOptions()
	o.Namespace = "guard"
	wantNS := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "guard"},
	}}}
	hs := hooks(o)
	if len(hs) != 6 {
		t.Fatalf("got %d distinct webhook names, want 6", len(hs))
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
			if diff := cmp.Diff(wantNS, h.namespaceSel); diff != "" {
				t.Errorf("namespaceSelector (-want +got):\n%s", diff)
			}
			if h.objectSel == nil {
				t.Error("objectSelector is nil; the apiserver defaults it to {} and Apply would never converge")
			}
			svc := h.clientConfig.Service
			if svc == nil || svc.Namespace != "guard" || svc.Name != olmguard.WebhookServiceName || *svc.Port != DefaultServicePort || h.clientConfig.URL != nil {
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
	want := Paths()
	slices.Sort(want)
	if !slices.Equal(paths, want) {
		t.Errorf("paths = %v, want %v", paths, want)
	}
}

func TestBuildPerWebhook(t *testing.T) {
	hs := hooks(DefaultOptions())
	ops := func(o ...admissionregistrationv1.OperationType) []admissionregistrationv1.OperationType { return o }
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	for _, tc := range []struct {
		name, path, group, version, resource string
		ops                                  []admissionregistrationv1.OperationType
		objectSel                            []metav1.LabelSelectorRequirement
		conditions                           []string // substrings expected in the CEL expressions, in order
	}{
		{
			name: MutateInstallPlansName, path: olmguard.MutateInstallPlansPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "installplans", ops: ops(create, update),
		},
		{
			name: MutateClusterServiceVersionsName, path: olmguard.MutateClusterServiceVersionsPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "clusterserviceversions", ops: ops(create, update),
			objectSel:  []metav1.LabelSelectorRequirement{{Key: "olm.copiedFrom", Operator: metav1.LabelSelectorOpDoesNotExist}},
			conditions: []string{"deletionTimestamp", "'olmguard.io/cleanup' in object.metadata.finalizers", "annotations['olmguard.io/cleanup'] != 'disabled'"},
		},
		{
			name: MutateJobsName, path: olmguard.MutateJobsPath,
			group: "batch", version: "v1", resource: "jobs", ops: ops(create),
			objectSel: []metav1.LabelSelectorRequirement{
				{Key: "operatorframework.io/bundle-unpack-ref", Operator: metav1.LabelSelectorOpExists},
				{Key: "olm.managed", Operator: metav1.LabelSelectorOpIn, Values: []string{"true"}},
			},
		},
		{
			name: ValidateSubscriptionsName, path: olmguard.ValidateSubscriptionsPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "subscriptions", ops: ops(create, update),
		},
		{
			name: ValidateInstallPlansName, path: olmguard.ValidateInstallPlansPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "installplans", ops: ops(update),
		},
		{
			name: ValidateClusterServiceVersionsName, path: olmguard.ValidateClusterServiceVersionsPath,
			group: "operators.coreos.com", version: "v1alpha1", resource: "clusterserviceversions", ops: ops(update),
			objectSel:  []metav1.LabelSelectorRequirement{{Key: "olm.copiedFrom", Operator: metav1.LabelSelectorOpDoesNotExist}},
			conditions: []string{"'olmguard.io/cleanup' in oldObject.metadata.finalizers && !(has(object.metadata.finalizers) && 'olmguard.io/cleanup' in object.metadata.finalizers)"},
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
	o := DefaultOptions()
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

func TestBuildIsPure(t *testing.T) {
	m1, v1 := Build(DefaultOptions())
	m2, v2 := Build(DefaultOptions())
	if diff := cmp.Diff(m1, m2); diff != "" {
		t.Errorf("two builds differ:\n%s", diff)
	}
	if diff := cmp.Diff(v1, v2); diff != "" {
		t.Errorf("two builds differ:\n%s", diff)
	}
	// Zero values take the defaults.
	m3, _ := Build(Options{Namespace: olmguard.DefaultNamespace, ServiceName: olmguard.WebhookServiceName})
	if diff := cmp.Diff(m1, m3); diff != "" {
		t.Errorf("zero port and timeout do not take the defaults:\n%s", diff)
	}
}

func TestExcludedNamespaces(t *testing.T) {
	if got := ExcludedNamespaces("kube-system"); !slices.Equal(got, []string{"kube-system"}) {
		t.Errorf("ExcludedNamespaces(kube-system) = %v", got)
	}
}

func TestValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Options)
		ok     bool
	}{
		"defaults":         {func(*Options) {}, true},
		"url":              {func(o *Options) { o.URL = "https://127.0.0.1:9443" }, true},
		"url with path":    {func(o *Options) { o.URL = "https://host.example/base" }, true},
		"http url":         {func(o *Options) { o.URL = "http://127.0.0.1:9443" }, false},
		"url without host": {func(o *Options) { o.URL = "https://:9443" }, false},
		"url with query":   {func(o *Options) { o.URL = "https://h?x=1" }, false},
		"url garbage":      {func(o *Options) { o.URL = "://" }, false},
		"no namespace":     {func(o *Options) { o.Namespace = "" }, false},
		"no service":       {func(o *Options) { o.ServiceName = "" }, false},
		"bad port":         {func(o *Options) { o.ServicePort = 70000 }, false},
		"long timeout":     {func(o *Options) { o.TimeoutSeconds = 31 }, false},
	} {
		t.Run(name, func(t *testing.T) {
			o := DefaultOptions()
			tc.mutate(&o)
			if err := o.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
