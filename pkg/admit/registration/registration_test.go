package registration

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

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
