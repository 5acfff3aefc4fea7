// Package webhook assembles olmguard's admission server: a controller-runtime manager with a
// webhook server on the admission paths, health and readiness probes, metrics, certificates from a
// watched directory or from package certs, and, out of cluster, registration of olmguard's webhook
// configurations.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/olmguard/olmguard/certs"
	"github.com/olmguard/olmguard/internal/kubeapi"
	"github.com/olmguard/olmguard/internal/tlsconfig"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/metricsauth"
	olmscheme "github.com/olmguard/olmguard/pkg/olm/scheme"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

func log(ctx context.Context) logr.Logger { return logf.FromContext(ctx).WithName("webhook") }

// Server is the assembled webhook server.
type Server struct {
	opts    Options
	mgr     manager.Manager
	direct  client.Client // uncached: Secrets and webhook configurations must not be watched
	certDir string
	tempDir bool
	rotator *certs.Rotator
	watcher atomic.Pointer[certwatcher.CertWatcher]
	drain   drainer
}

// New validates the options and builds the manager and handlers. It binds the probe and metrics
// listeners but contacts no apiserver; Start does.
func New(cfg *rest.Config, o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := validateEndpoints(o.Endpoints); err != nil {
		return nil, err
	}
	scheme, err := olmscheme.New()
	if err != nil {
		return nil, fmt.Errorf("building scheme: %w", err)
	}
	var clientCAs *tlsconfig.ClientCAs
	if o.ClientCAFile != "" {
		if clientCAs, err = tlsconfig.LoadClientCAs(o.ClientCAFile); err != nil {
			return nil, fmt.Errorf("--client-ca-file: %w", err)
		}
	}
	s := &Server{opts: o, certDir: o.CertDir}
	tlsOpts := []func(*tls.Config){tlsconfig.Harden, func(c *tls.Config) { c.GetCertificate = s.getCertificate }}
	if clientCAs != nil {
		tlsOpts = append(tlsOpts, tlsconfig.RequestClientCert)
	}
	if s.certDir == "" { // only with --self-signed (Validate)
		if s.certDir, err = os.MkdirTemp("", "olmguard-webhook-certs-"); err != nil {
			return nil, fmt.Errorf("creating a certificate directory: %w", err)
		}
		s.tempDir = true
	}
	mgr, err := manager.New(kubeapi.WithLimits(cfg), manager.Options{
		Scheme:                 scheme,
		Metrics:                metricsauth.ServerOptions(o.MetricsBindAddress, o.MetricsSecure),
		HealthProbeBindAddress: o.HealthProbeBindAddress,
		// Handlers read OLM objects through the cache; managed fields are never needed. Of
		// Subscriptions the cache keeps only the trimmed view a decision reads, and fills itself
		// a page at a time (admit.NewInformer): a tenant decides their size.
		Cache: admit.WithSubscriptionCache(cache.Options{DefaultTransform: cache.TransformStripManagedFields()}),
		WebhookServer: crwebhook.NewServer(crwebhook.Options{
			Port:    o.Port,
			CertDir: s.certDir,
			TLSOpts: tlsOpts,
		}),
	})
	if err != nil {
		s.cleanup()
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	s.mgr = mgr
	if s.direct, err = client.New(cfg, client.Options{Scheme: scheme, HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper()}); err != nil {
		s.cleanup()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	if o.SelfSigned {
		co := certs.DefaultOptions()
		co.Spec = o.certSpec()
		co.CertDir = s.certDir
		co.RecheckInterval = o.CertRecheckInterval
		if s.rotator, err = certs.NewRotator(s.direct, co); err != nil {
			s.cleanup()
			return nil, err
		}
	}
	// Both series exist from the start, at 0, for alerts on their rate.
	metrics.WebhookRequestsRefused.WithLabelValues(RefusedUnauthenticated)
	metrics.WebhookRequestsRefused.WithLabelValues(RefusedOverloaded)
	// Every admission path: unauthenticated calls refused first, then the in-flight cap (one for
	// all paths), then the review's checks and the handler.
	limit := inflightLimiter(o.MaxInflightRequests)
	guard := func(next http.Handler) http.Handler {
		next = limit(next)
		if clientCAs != nil {
			next = clientAuth(clientCAs, o.ClientCNNames, next)
		}
		return next
	}
	for _, e := range o.Endpoints {
		h, err := e.Build(mgr)
		if err != nil {
			s.cleanup()
			return nil, fmt.Errorf("building the handler of %s: %w", e.Path, err)
		}
		mgr.GetWebhookServer().Register(e.Path, s.drain.wrap(guard(reviewGuard(&crwebhook.Admission{Handler: admit.Serve(e.Path, h)}))))
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		s.cleanup()
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", s.ReadyCheck); err != nil {
		s.cleanup()
		return nil, err
	}
	return s, nil
}

// Manager returns the underlying manager (its client reads through the cache).
func (s *Server) Manager() manager.Manager { return s.mgr }

// CertDir returns the directory the server loads its certificate from.
func (s *Server) CertDir() string { return s.certDir }

// Run builds a server and runs it until ctx is done.
func Run(ctx context.Context, cfg *rest.Config, o Options) error {
	s, err := New(cfg, o)
	if err != nil {
		return err
	}
	return s.Start(ctx)
}

// Start provisions the certificate, registers the configurations when asked to, and serves until
// ctx is done. It returns nil on a clean shutdown.
func (s *Server) Start(ctx context.Context) error {
	defer s.cleanup()
	l := log(ctx)
	var caBundle []byte
	if s.rotator != nil {
		if err := s.ensureNamespace(ctx); err != nil {
			return err
		}
		b, err := s.rotator.Sync(ctx)
		if err != nil {
			return fmt.Errorf("provisioning the self-signed certificate: %w", err)
		}
		caBundle = b.CACert
		if err := s.mgr.Add(s.rotator); err != nil {
			return err
		}
	} else {
		var err error
		if caBundle, err = certs.ReadCABundle(s.certDir); err != nil {
			return err
		}
	}
	w, err := certwatcher.New(filepath.Join(s.certDir, certs.CertFile), filepath.Join(s.certDir, certs.KeyFile))
	if err != nil {
		return fmt.Errorf("loading the serving certificate from %s: %w", s.certDir, err)
	}
	w.RegisterCallback(recordExpiry)
	s.watcher.Store(w)
	if err := s.mgr.Add(w); err != nil {
		return err
	}
	if s.opts.RegisterURL != "" {
		if err := s.registerWith(ctx, caBundle); err != nil {
			return err
		}
		l.Info("registered webhook configurations", "url", s.opts.RegisterURL)
		if s.rotator == nil {
			// The rotator injects its own CA; a certificate manager may rotate ca.crt.
			if err := s.mgr.Add(&caWatcher{s: s, last: caBundle, interval: caPollInterval}); err != nil {
				return err
			}
		}
	}
	return s.mgr.Start(s.drain.delayStop(ctx, s.opts.ShutdownDrain))
}

// ensureNamespace creates olmguard's namespace when it is missing, as the manifests would: with
// --self-signed the server keeps its certificate in a Secret there, and a new user starting the
// binary out of cluster has no namespace yet. A caller that may not read namespaces (in cluster,
// where the manifests made it) goes on.
func (s *Server) ensureNamespace(ctx context.Context) error {
	ns := &corev1.Namespace{}
	err := s.direct.Get(ctx, client.ObjectKey{Name: s.opts.Namespace}, ns)
	if !apierrors.IsNotFound(err) {
		return nil
	}
	ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.opts.Namespace, Labels: map[string]string{
		olmguard.NameLabel: olmguard.Name, "pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := s.direct.Create(ctx, ns, client.FieldOwner(olmguard.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s does not exist and could not be created (%w): create it with `kubectl create namespace %s`, or pass --namespace",
			s.opts.Namespace, err, s.opts.Namespace)
	}
	log(ctx).Info("created olmguard's namespace, which did not exist", "namespace", s.opts.Namespace)
	return nil
}

// caPollInterval is how often ca.crt is re-read in --cert-dir mode with --register-url, as often
// as the certificate watcher polls.
const caPollInterval = 10 * time.Second

// caWatcher re-registers the configurations when ca.crt in the certificate directory changes.
// Polling (rather than the certificate watcher's callback) also sees a ca.crt written after the
// certificate.
type caWatcher struct {
	s        *Server
	last     []byte
	interval time.Duration
}

func (c *caWatcher) NeedLeaderElection() bool { return false }

func (c *caWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		ca, err := certs.ReadCABundle(c.s.certDir)
		if err != nil || bytes.Equal(ca, c.last) {
			continue
		}
		if err := c.s.registerWith(ctx, ca); err != nil {
			log(ctx).Error(err, "re-registering webhook configurations with a new ca.crt")
			continue
		}
		c.last = ca
		log(ctx).Info("re-registered webhook configurations with a new ca.crt")
	}
}

func (s *Server) registerWith(ctx context.Context, caBundle []byte) error {
	ro := registration.DefaultOptions()
	ro.Namespace, ro.ServiceName, ro.URL, ro.CABundle = s.opts.Namespace, s.opts.ServiceName, s.opts.RegisterURL, caBundle
	if s.opts.RegisterTimeoutSeconds != 0 {
		ro.TimeoutSeconds = s.opts.RegisterTimeoutSeconds
	}
	return registration.Apply(ctx, s.direct, ro, admit.Webhooks(s.opts.Endpoints))
}

// ReadyCheck passes once the serving certificate is loaded, the caches are synced and the webhook
// server accepts TLS connections.
func (s *Server) ReadyCheck(req *http.Request) error {
	w := s.watcher.Load()
	if w == nil {
		return errors.New("serving certificate not loaded")
	}
	if c, _ := w.GetCertificate(nil); c == nil {
		return errors.New("serving certificate not loaded")
	}
	ctx, cancel := context.WithTimeout(req.Context(), time.Second)
	defer cancel()
	if !s.mgr.GetCache().WaitForCacheSync(ctx) {
		return errors.New("caches not synced")
	}
	return s.mgr.GetWebhookServer().StartedChecker()(req)
}

func (s *Server) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	w := s.watcher.Load()
	if w == nil {
		return nil, errors.New("serving certificate not loaded")
	}
	return w.GetCertificate(hello)
}

// cleanup removes a temporary certificate directory.
func (s *Server) cleanup() {
	if s.tempDir {
		_ = os.RemoveAll(s.certDir)
	}
}

func recordExpiry(c tls.Certificate) {
	if len(c.Certificate) == 0 {
		return
	}
	if leaf, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
		metrics.WebhookCertificateExpiry.Set(float64(leaf.NotAfter.Unix()))
	}
}
