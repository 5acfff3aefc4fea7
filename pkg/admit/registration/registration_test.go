package registration

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

// oneHook stands in for the admission table, which lives in pkg/setup (tested there).
var oneHook = []Webhook{{Name: "x.olmguard.io", Path: "/x", Mutating: true, Rules: OLMRule("installplans", admissionregistrationv1.Create)}}

func TestBuildIsPure(t *testing.T) {
	m1, v1 := Build(DefaultOptions(), oneHook)
	m2, v2 := Build(DefaultOptions(), oneHook)
	if diff := cmp.Diff(m1, m2); diff != "" {
		t.Errorf("two builds differ:\n%s", diff)
	}
	if diff := cmp.Diff(v1, v2); diff != "" {
		t.Errorf("two builds differ:\n%s", diff)
	}
	// Zero values take the defaults.
	m3, _ := Build(Options{Namespace: olmguard.DefaultNamespace, ServiceName: olmguard.WebhookServiceName}, oneHook)
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

// An OwnNamespace entry is sent olmguard's namespace only; every other entry every namespace but
// kube-system and olmguard's. The probe's dry runs reach the webhook, nothing else of olmguard's
// namespace does.
func TestOwnNamespace(t *testing.T) {
	o := DefaultOptions()
	o.Namespace = "guard"
	hooks := []Webhook{
		{Name: "own.mutate.olmguard.io", Path: "/own", Mutating: true, Rules: WebhookProbeCreates(), OwnNamespace: true},
		{Name: "other.mutate.olmguard.io", Path: "/other", Mutating: true, Rules: OLMRule("installplans", admissionregistrationv1.Create)},
		{Name: "own.validate.olmguard.io", Path: "/own-v", Rules: WebhookProbeCreates(), OwnNamespace: true},
	}
	m, v := Build(o, hooks)
	sel := func(s *metav1.LabelSelector) string {
		e := s.MatchExpressions
		if len(e) != 1 || e[0].Key != "kubernetes.io/metadata.name" {
			return "unexpected"
		}
		return string(e[0].Operator) + " " + strings.Join(e[0].Values, ",")
	}
	for name, got := range map[string]string{
		"own.mutate.olmguard.io": sel(m.Webhooks[0].NamespaceSelector), "other.mutate.olmguard.io": sel(m.Webhooks[1].NamespaceSelector),
		"own.validate.olmguard.io": sel(v.Webhooks[0].NamespaceSelector),
	} {
		want := "NotIn kube-system,guard"
		if strings.HasPrefix(name, "own.") {
			want = "In guard"
		}
		if got != want {
			t.Errorf("%s: namespaceSelector %q, want %q", name, got, want)
		}
	}
}
