package webhook

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/olmguard/olmguard/certs"
	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/internal/tlsconfig"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// Options configure the webhook server. The exported fields above Endpoints are its flags.
type Options struct {
	// Port serves the admission paths over HTTPS.
	Port int
	// HealthProbeBindAddress serves /healthz and /readyz ("0" disables).
	HealthProbeBindAddress string
	// MetricsBindAddress serves /metrics ("0" disables).
	MetricsBindAddress string
	// MetricsSecure serves /metrics over HTTPS to authenticated, authorized callers only.
	MetricsSecure bool
	// Namespace and ServiceName locate olmguard's webhook Service and TLS Secret.
	Namespace   string
	ServiceName string
	// CertDir holds tls.crt and tls.key (and optionally ca.crt), e.g. a mounted Secret; it is
	// watched and hot reloaded. With SelfSigned it is where the issued files are written.
	CertDir string
	// SelfSigned makes the server issue and rotate its own CA and certificate (package certs).
	SelfSigned bool
	// SelfSignedCADuration and SelfSignedCertDuration are the lifetimes of issued certificates.
	SelfSignedCADuration   time.Duration
	SelfSignedCertDuration time.Duration
	// ExtraSANs (DNS names or IPs) are added to a self-signed certificate. The host of RegisterURL
	// is added automatically.
	ExtraSANs []string
	// RegisterURL, when set, makes the server create or update olmguard's webhook configurations
	// to call RegisterURL + path (out-of-cluster use). Otherwise manifests provide them.
	RegisterURL string
	// RegisterTimeoutSeconds is the timeoutSeconds of the configurations RegisterURL registers
	// (0: registration.DefaultTimeoutSeconds).
	RegisterTimeoutSeconds int32
	// ClientCAFile, when set, is a PEM CA bundle: every call to the admission paths must present a
	// TLS client certificate that chains to it, for client authentication, or is refused with
	// 403 before any admission logic runs. Re-read when the file changes.
	ClientCAFile string
	// ClientCNNames are the CommonNames a client certificate may carry with ClientCAFile
	// (default kube-apiserver). Empty: any certificate the CA issued for client authentication,
	// which is right only for a CA that issues nothing but the kube-apiserver's webhook client
	// certificates.
	ClientCNNames []string
	// MaxInflightRequests caps the admission calls handled at once; one more is answered 429 at
	// once (0: no cap).
	MaxInflightRequests int
	// ShutdownDrain is how long the server keeps answering after it is told to stop, closing
	// each connection after its answer, before it stops serving (drain.go).
	ShutdownDrain time.Duration

	// Endpoints are the admission paths served and registered (pkg/setup's admission table).
	Endpoints []admit.Endpoint
	// CertRecheckInterval overrides how often a self-signed bundle is re-checked (tests).
	CertRecheckInterval time.Duration
}

// DefaultMaxInflightRequests is --max-inflight-requests' default: room for bursts of OLM's
// writes (each review is answered in milliseconds), low enough that a flood of calls cannot make
// a replica hold more than that many reviews and lookups in memory at once.
const DefaultMaxInflightRequests = 64

// DefaultOptions returns the flag defaults.
func DefaultOptions() Options {
	return Options{
		Port:                   9443,
		HealthProbeBindAddress: ":8081",
		MetricsBindAddress:     ":8080",
		MetricsSecure:          true,
		Namespace:              olmguard.DefaultNamespace,
		ServiceName:            olmguard.WebhookServiceName,
		SelfSignedCADuration:   certs.DefaultCADuration,
		SelfSignedCertDuration: certs.DefaultCertDuration,
		ShutdownDrain:          DefaultShutdownDrain,
		ClientCNNames:          []string{tlsconfig.DefaultClientCommonName},
		MaxInflightRequests:    DefaultMaxInflightRequests,
	}
}

// BindFlags registers the flags on fs, with the current values as defaults.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.Port, "port", o.Port, "HTTPS port of the admission paths")
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress, `address of /healthz and /readyz ("0" disables)`)
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress, `address of /metrics ("0" disables)`)
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "serve /metrics over HTTPS, only to callers the kube-apiserver authenticates and allows get on /metrics")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "namespace of olmguard (webhook Service, TLS Secret); never sent to the webhook, but for the reachability probe's dry runs")
	fs.StringVar(&o.ServiceName, "service-name", o.ServiceName, "name of the webhook Service, used for the certificate's DNS names")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "directory with tls.crt, tls.key and optionally ca.crt, hot reloaded; with --self-signed, where the issued files go (empty: a temporary directory)")
	fs.BoolVar(&o.SelfSigned, "self-signed", o.SelfSigned, "issue and rotate a self-signed CA and serving certificate, kept in Secret "+olmguard.WebhookTLSSecretName+", and inject the CA into olmguard's webhook configurations")
	fs.DurationVar(&o.SelfSignedCADuration, "self-signed-ca-duration", o.SelfSignedCADuration, "lifetime of a self-signed CA")
	fs.DurationVar(&o.SelfSignedCertDuration, "self-signed-cert-duration", o.SelfSignedCertDuration, "lifetime of a self-signed serving certificate")
	fs.Var(flags.List{Items: &o.ExtraSANs, Append: true}, "extra-sans", "comma-separated extra DNS names and IPs for a self-signed certificate")
	fs.DurationVar(&o.ShutdownDrain, "shutdown-drain", o.ShutdownDrain, "after SIGTERM, how long the server keeps answering reviews while closing every connection after its answer, so that the kube-apiserver moves its kept-alive connections to another replica before this one stops (0: stop at once)")
	fs.StringVar(&o.ClientCAFile, "client-ca-file", o.ClientCAFile, "PEM CA bundle: when set, every admission call must present a TLS client certificate from this CA with an allowed CommonName (--client-cn-names), or is refused with 403 before any admission logic; re-read when the file changes (docs/webhook-auth.md)")
	fs.Var(flags.List{Items: &o.ClientCNNames}, "client-cn-names", "comma-separated CommonNames a client certificate may carry with --client-ca-file; an empty value accepts any client certificate the CA issued (only for a CA that issues nothing else)")
	fs.IntVar(&o.MaxInflightRequests, "max-inflight-requests", o.MaxInflightRequests, "admission calls handled at once (their review bodies also at most 24 MiB together); more are answered 429 at once, which the kube-apiserver treats as a failed call (failurePolicy Ignore: admitted without olmguard's answer) (0: no cap)")
	fs.StringVar(&o.RegisterURL, "register-url", o.RegisterURL, "base URL the apiserver calls (e.g. https://127.0.0.1:9443); when set, the server creates or updates olmguard's webhook configurations itself")
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	if o.Port < 1 || o.Port > 65535 {
		return fmt.Errorf("--port %d is out of range 1-65535", o.Port)
	}
	if err := ValidateBindAddress(o.HealthProbeBindAddress); err != nil {
		return fmt.Errorf("--health-probe-bind-address: %w", err)
	}
	if err := ValidateBindAddress(o.MetricsBindAddress); err != nil {
		return fmt.Errorf("--metrics-bind-address: %w", err)
	}
	if errs := validation.IsDNS1123Label(o.Namespace); len(errs) > 0 {
		return fmt.Errorf("--namespace %q: %s", o.Namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1035Label(o.ServiceName); len(errs) > 0 {
		return fmt.Errorf("--service-name %q: %s", o.ServiceName, strings.Join(errs, "; "))
	}
	if o.ShutdownDrain < 0 || o.ShutdownDrain > 20*time.Second {
		return fmt.Errorf("--shutdown-drain %s is outside 0-20s (it must end well within the pod's termination grace period)", o.ShutdownDrain)
	}
	if !o.SelfSigned && o.CertDir == "" {
		return errors.New("one of --cert-dir or --self-signed is required")
	}
	if o.SelfSigned {
		if o.SelfSignedCADuration < time.Minute {
			return fmt.Errorf("--self-signed-ca-duration %s is shorter than 1m", o.SelfSignedCADuration)
		}
		if o.SelfSignedCertDuration < 3*time.Second || o.SelfSignedCertDuration > o.SelfSignedCADuration {
			return fmt.Errorf("--self-signed-cert-duration %s must be at least 3s and at most --self-signed-ca-duration", o.SelfSignedCertDuration)
		}
	}
	for _, san := range o.ExtraSANs {
		if net.ParseIP(san) == nil && len(validation.IsDNS1123Subdomain(san)) > 0 {
			return fmt.Errorf("--extra-sans: %q is neither an IP nor a DNS name", san)
		}
	}
	if o.MaxInflightRequests < 0 {
		return fmt.Errorf("--max-inflight-requests %d is negative (0: no cap)", o.MaxInflightRequests)
	}
	for _, cn := range o.ClientCNNames {
		if strings.ContainsFunc(cn, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("--client-cn-names: %q holds a control character", cn)
		}
	}
	if o.RegisterURL != "" {
		if err := registration.ValidateURL(o.RegisterURL); err != nil {
			return fmt.Errorf("--register-url: %w", err)
		}
	}
	return nil
}

// validateEndpoints rejects a table the server could not serve or register: no entry, a path
// or name twice, a path that is not absolute, or an entry without a handler.
func validateEndpoints(endpoints []admit.Endpoint) error {
	if len(endpoints) == 0 {
		return errors.New("no admission endpoints to serve")
	}
	paths, names := map[string]bool{}, map[string]bool{}
	for _, e := range endpoints {
		switch {
		case !strings.HasPrefix(e.Path, "/"):
			return fmt.Errorf("admission endpoint %q: the path must start with /", e.Path)
		case paths[e.Path]:
			return fmt.Errorf("admission endpoint %q is declared twice", e.Path)
		case e.Name == "" || names[e.Name]:
			return fmt.Errorf("admission endpoint %q: webhook name %q is empty or used twice", e.Path, e.Name)
		case e.Handler == nil:
			return fmt.Errorf("admission endpoint %q has no handler", e.Path)
		}
		paths[e.Path], names[e.Name] = true, true
	}
	return nil
}

// ValidateBindAddress accepts "0" (disabled) or host:port.
func ValidateBindAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%q is not host:port or \"0\"", addr)
	}
	if p, err := net.LookupPort("tcp", port); err != nil || p < 0 || p > 65535 {
		return fmt.Errorf("%q has an invalid port", addr)
	}
	return nil
}

// certSpec is the self-signed certificate's spec: the Service's names, the extra SANs and the
// register URL's host.
func (o *Options) certSpec() certs.Spec {
	s := certs.Spec{
		ServiceName: o.ServiceName, Namespace: o.Namespace,
		CADuration: o.SelfSignedCADuration, CertDuration: o.SelfSignedCertDuration,
	}
	sans := slices.Clone(o.ExtraSANs)
	if u, err := url.Parse(o.RegisterURL); err == nil && u.Hostname() != "" {
		sans = append(sans, u.Hostname())
	}
	for _, san := range sans {
		if ip := net.ParseIP(san); ip != nil {
			s.ExtraIPs = append(s.ExtraIPs, ip)
		} else {
			s.ExtraDNSNames = append(s.ExtraDNSNames, san)
		}
	}
	return s
}
