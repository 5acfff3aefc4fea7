package webhook

import (
	"flag"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
)

func TestDefaultOptionsFromFlags(t *testing.T) {
	o := DefaultOptions()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"port": "9443", "health-probe-bind-address": ":8081", "metrics-bind-address": ":8080",
		"namespace": "olmguard-system", "service-name": "olmguard-webhook", "self-signed": "false",
		"cert-dir": "", "register-url": "", "shutdown-drain": "3s",
		"client-ca-file": "", "client-cn-names": "kube-apiserver", "max-inflight-requests": "64",
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("flag --%s is missing", name)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, want)
		}
	}
	if err := fs.Parse([]string{"--extra-sans", "a.example, 10.0.0.1", "--extra-sans=b.example"}); err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.example", "10.0.0.1", "b.example"}; !slices.Equal(o.ExtraSANs, want) {
		t.Errorf("ExtraSANs = %v, want %v", o.ExtraSANs, want)
	}
	// --client-cn-names replaces the default; an empty value allows any CommonName.
	for arg, want := range map[string][]string{"a, b,,c": {"a", "b", "c"}, "": {}, "kube-apiserver": {"kube-apiserver"}} {
		if err := fs.Parse([]string{"--client-cn-names=" + arg}); err != nil {
			t.Fatal(err)
		}
		if o.ClientCNNames == nil || !slices.Equal(o.ClientCNNames, want) {
			t.Errorf("--client-cn-names=%q: %#v, want %#v", arg, o.ClientCNNames, want)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	valid := func() Options {
		o := DefaultOptions()
		o.SelfSigned = true
		return o
	}
	for name, tc := range map[string]struct {
		mutate func(*Options)
		ok     bool
	}{
		"self-signed":               {func(*Options) {}, true},
		"cert dir":                  {func(o *Options) { o.SelfSigned, o.CertDir = false, "/certs" }, true},
		"both":                      {func(o *Options) { o.CertDir = "/certs" }, true},
		"neither":                   {func(o *Options) { o.SelfSigned = false }, false},
		"port 0":                    {func(o *Options) { o.Port = 0 }, false},
		"port too big":              {func(o *Options) { o.Port = 65536 }, false},
		"metrics disabled":          {func(o *Options) { o.MetricsBindAddress = "0" }, true},
		"probes disabled":           {func(o *Options) { o.HealthProbeBindAddress = "0" }, true},
		"metrics host:port":         {func(o *Options) { o.MetricsBindAddress = "127.0.0.1:9000" }, true},
		"metrics without port":      {func(o *Options) { o.MetricsBindAddress = "8080" }, false},
		"metrics empty port":        {func(o *Options) { o.MetricsBindAddress = "127.0.0.1:" }, false},
		"probe bad port":            {func(o *Options) { o.HealthProbeBindAddress = ":99999" }, false},
		"bad namespace":             {func(o *Options) { o.Namespace = "Not_A_Namespace" }, false},
		"empty service":             {func(o *Options) { o.ServiceName = "" }, false},
		"register url":              {func(o *Options) { o.RegisterURL = "https://127.0.0.1:9443" }, true},
		"no shutdown drain":         {func(o *Options) { o.ShutdownDrain = 0 }, true},
		"negative shutdown drain":   {func(o *Options) { o.ShutdownDrain = -time.Second }, false},
		"shutdown drain too long":   {func(o *Options) { o.ShutdownDrain = 21 * time.Second }, false},
		"http register url":         {func(o *Options) { o.RegisterURL = "http://127.0.0.1:9443" }, false},
		"extra SANs":                {func(o *Options) { o.ExtraSANs = []string{"localhost", "::1", "a.b.example"} }, true},
		"bad extra SAN":             {func(o *Options) { o.ExtraSANs = []string{"not a name"} }, false},
		"cert longer than CA":       {func(o *Options) { o.SelfSignedCertDuration = o.SelfSignedCADuration + time.Hour }, false},
		"tiny CA":                   {func(o *Options) { o.SelfSignedCADuration = time.Second }, false},
		"no in-flight cap":          {func(o *Options) { o.MaxInflightRequests = 0 }, true},
		"negative in-flight cap":    {func(o *Options) { o.MaxInflightRequests = -1 }, false},
		"client CA, any name":       {func(o *Options) { o.ClientCAFile, o.ClientCNNames = "/ca.crt", []string{} }, true},
		"control character in CN":   {func(o *Options) { o.ClientCAFile, o.ClientCNNames = "/ca.crt", []string{"kube\x1b[2J"} }, false},
		"durations ignored w/o -ss": {func(o *Options) { o.SelfSigned, o.CertDir, o.SelfSignedCADuration = false, "/c", 0 }, true},
	} {
		t.Run(name, func(t *testing.T) {
			o := valid()
			tc.mutate(&o)
			if err := o.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestCertSpec(t *testing.T) {
	o := DefaultOptions()
	o.ExtraSANs = []string{"localhost", "10.0.0.1"}
	o.RegisterURL = "https://127.0.0.1:9443"
	s := o.certSpec()
	if !slices.Equal(s.ExtraDNSNames, []string{"localhost"}) {
		t.Errorf("ExtraDNSNames = %v", s.ExtraDNSNames)
	}
	if len(s.ExtraIPs) != 2 || !s.ExtraIPs[1].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("ExtraIPs = %v, want 10.0.0.1 and the register URL's 127.0.0.1", s.ExtraIPs)
	}
	if s.ServiceName != o.ServiceName || s.Namespace != o.Namespace {
		t.Errorf("spec names %s/%s", s.Namespace, s.ServiceName)
	}
}

func TestValidateEndpoints(t *testing.T) {
	ep := func(name, path string, h admit.HandlerFactory) admit.Endpoint {
		return admit.Endpoint{Webhook: registration.Webhook{Name: name, Path: path}, Handler: h}
	}
	allow := admit.Static(admit.AllowAll)
	for name, tc := range map[string]struct {
		endpoints []admit.Endpoint
		wantErr   string
	}{
		"one":           {[]admit.Endpoint{ep("a.olmguard.io", "/a", allow)}, ""},
		"none":          {nil, "no admission endpoints"},
		"relative path": {[]admit.Endpoint{ep("a.olmguard.io", "a", allow)}, "must start with /"},
		"path twice":    {[]admit.Endpoint{ep("a.olmguard.io", "/a", allow), ep("b.olmguard.io", "/a", allow)}, "declared twice"},
		"name twice":    {[]admit.Endpoint{ep("a.olmguard.io", "/a", allow), ep("a.olmguard.io", "/b", allow)}, "used twice"},
		"no name":       {[]admit.Endpoint{ep("", "/a", allow)}, "empty"},
		"no handler":    {[]admit.Endpoint{ep("a.olmguard.io", "/a", nil)}, "no handler"},
	} {
		t.Run(name, func(t *testing.T) {
			err := validateEndpoints(tc.endpoints)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("validateEndpoints = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
