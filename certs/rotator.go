package certs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

// Keys of the Secret. ca.key lets every replica renew the serving certificate without changing
// the CA the apiserver trusts.
const (
	CertKey   = corev1.TLSCertKey       // tls.crt
	KeyKey    = corev1.TLSPrivateKeyKey // tls.key
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
)

// DefaultTrustDelay is Options.TrustDelay's default; apiservers see a configuration change within
// milliseconds, so this leaves a wide margin at the cost of one pause per CA rollover.
const DefaultTrustDelay = 2 * time.Second

// DefaultRecheckInterval is how often the Secret is re-read and the CA bundle re-injected, so a
// replica picks up another replica's renewal and re-applied manifests get their CA bundle back.
const DefaultRecheckInterval = time.Minute

// Options configure a Rotator.
type Options struct {
	Spec
	// SecretName is the Secret in Spec.Namespace that holds the bundle.
	SecretName string
	// CertDir, when set, receives tls.crt, tls.key and ca.crt for the webhook server.
	CertDir string
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations name the configurations
	// whose webhooks get the CA bundle. No other configuration is touched.
	MutatingWebhookConfigurations   []string
	ValidatingWebhookConfigurations []string
	// RecheckInterval is the longest time between two syncs.
	RecheckInterval time.Duration
	// TrustDelay is how long a sync that put a new CA into the configurations waits before the
	// server may present a certificate it signs: every kube-apiserver reads the configurations
	// through its own informer, and one that still trusts only the old CA fails the call (which
	// failurePolicy Ignore turns into an unmutated object).
	TrustDelay time.Duration
	// Now is the clock (time.Now when nil); tests move it.
	Now func() time.Time
	// Log defaults to controller-runtime's logger named "certs".
	Log logr.Logger
}

// DefaultOptions returns the options of olmguard's webhook in its default namespace.
func DefaultOptions() Options {
	return Options{
		Spec: Spec{
			ServiceName:  olmguard.WebhookServiceName,
			Namespace:    olmguard.DefaultNamespace,
			CADuration:   DefaultCADuration,
			CertDuration: DefaultCertDuration,
		},
		SecretName:                      olmguard.WebhookTLSSecretName,
		MutatingWebhookConfigurations:   []string{olmguard.MutatingWebhookConfigurationName},
		ValidatingWebhookConfigurations: []string{olmguard.ValidatingWebhookConfigurationName},
		RecheckInterval:                 DefaultRecheckInterval,
		TrustDelay:                      DefaultTrustDelay,
	}
}

// Rotator keeps the Secret, the certificate directory and the CA bundles in line. It is a
// controller-runtime Runnable that runs on every replica (no leader election): writes to the
// Secret use optimistic concurrency, so replicas converge on one bundle.
type Rotator struct {
	client client.Client
	opts   Options
}

// NewRotator validates the options. c must read the API directly (not through a cache): caching
// Secrets would watch every Secret in the cluster.
func NewRotator(c client.Client, o Options) (*Rotator, error) {
	if c == nil {
		return nil, errors.New("certs: a client is required")
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.SecretName == "" {
		return nil, errors.New("certs: secret name is required")
	}
	if o.RecheckInterval <= 0 {
		o.RecheckInterval = DefaultRecheckInterval
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log.GetSink() == nil {
		o.Log = logf.Log.WithName("certs")
	}
	return &Rotator{client: c, opts: o}, nil
}

// NeedLeaderElection is false: every replica needs the certificate files.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start syncs until ctx is done, waking up before the next renewal is due.
func (r *Rotator) Start(ctx context.Context) error {
	for {
		wait := r.opts.RecheckInterval
		if renewAt, err := r.sync(ctx); err != nil {
			r.opts.Log.Error(err, "syncing webhook certificates")
			wait = min(wait, 10*time.Second)
		} else if until := renewAt.Sub(r.opts.Now()); until < wait {
			wait = max(until, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// Sync makes sure the Secret holds a valid bundle, injects its CA bundle and writes its files.
func (r *Rotator) Sync(ctx context.Context) (*Bundle, error) {
	b, _, err := r.ensure(ctx)
	if err != nil {
		return nil, err
	}
	return b, r.publish(ctx, b)
}

func (r *Rotator) sync(ctx context.Context) (time.Time, error) {
	b, renewAt, err := r.ensure(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return renewAt, r.publish(ctx, b)
}

// publish injects the CA bundle before writing the files: after a CA rollover the apiserver must
// trust the new CA before the server presents a certificate signed by it. When the injection
// changed a configuration and the server already serves files, it waits TrustDelay in between.
func (r *Rotator) publish(ctx context.Context, b *Bundle) error {
	changed, errInject := InjectCABundle(ctx, r.client, b.CACert, r.opts.MutatingWebhookConfigurations, r.opts.ValidatingWebhookConfigurations)
	if r.opts.CertDir == "" {
		return errInject
	}
	if changed && r.opts.TrustDelay > 0 && serving(r.opts.CertDir) {
		t := time.NewTimer(r.opts.TrustDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(errInject, ctx.Err())
		case <-t.C:
		}
	}
	return errors.Join(errInject, WriteFiles(r.opts.CertDir, b))
}

// serving reports whether dir already holds a certificate (the server presents it).
func serving(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, CertFile))
	return err == nil
}

// Ensure returns the bundle in the Secret, first creating or renewing it when Decide says so.
func (r *Rotator) Ensure(ctx context.Context) (*Bundle, error) {
	b, _, err := r.ensure(ctx)
	return b, err
}

func (r *Rotator) ensure(ctx context.Context) (*Bundle, time.Time, error) {
	key := client.ObjectKey{Namespace: r.opts.Namespace, Name: r.opts.SecretName}
	// Another replica may write the Secret between our read and write: re-read and decide again.
	var lastErr error
	for range 5 {
		secret := &corev1.Secret{}
		var current *Bundle
		switch err := r.client.Get(ctx, key, secret); {
		case apierrors.IsNotFound(err):
			secret = nil
		case err != nil:
			return nil, time.Time{}, fmt.Errorf("certs: reading Secret %s: %w", key, err)
		default:
			current = FromSecret(secret)
		}
		now := r.opts.Now()
		d := Decide(current, r.opts.Spec, now)
		if d.Action == Keep {
			return current, d.RenewAt, nil
		}
		next, err := Renew(current, d, r.opts.Spec, now)
		if err != nil {
			return nil, time.Time{}, err
		}
		if err := r.save(ctx, key, secret, next); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				lastErr = err
				continue
			}
			return nil, time.Time{}, fmt.Errorf("certs: writing Secret %s: %w", key, err)
		}
		r.opts.Log.Info("issued webhook certificates", "secret", key.String(), "action", d.Action.String(), "reason", d.Reason)
		return next, Decide(next, r.opts.Spec, now).RenewAt, nil
	}
	return nil, time.Time{}, fmt.Errorf("certs: writing Secret %s: too many concurrent updates: %w", key, lastErr)
}

func (r *Rotator) save(ctx context.Context, key client.ObjectKey, existing *corev1.Secret, b *Bundle) error {
	if existing == nil {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: key.Name, Namespace: key.Namespace,
				Labels: map[string]string{olmguard.NameLabel: olmguard.Name},
			},
			Type: corev1.SecretTypeTLS,
			Data: b.data(),
		}
		return r.client.Create(ctx, s, client.FieldOwner(olmguard.FieldManager))
	}
	// Keep other keys and the type: the Secret may have been created by someone else.
	if existing.Data == nil {
		existing.Data = map[string][]byte{}
	}
	for k, v := range b.data() {
		existing.Data[k] = v
	}
	return r.client.Update(ctx, existing, client.FieldOwner(olmguard.FieldManager))
}

// FromSecret reads a bundle from a Secret's data; missing keys give empty fields.
func FromSecret(s *corev1.Secret) *Bundle {
	return &Bundle{CACert: s.Data[CACertKey], CAKey: s.Data[CAKeyKey], Cert: s.Data[CertKey], Key: s.Data[KeyKey]}
}

func (b *Bundle) data() map[string][]byte {
	return map[string][]byte{CACertKey: b.CACert, CAKeyKey: b.CAKey, CertKey: b.Cert, KeyKey: b.Key}
}
