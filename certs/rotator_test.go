package certs_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/certs"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/testenv"
)

// The tests of this package share one control plane; each uses its own namespace.
func TestMain(m *testing.M) {
	testenv.LogWhenVerbose()
	testenv.Main(m, nil)
}

// clock is a movable clock for the rotator.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

func webhookConfig(name string) *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "x.olmguard.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Namespace: "olmguard-system", Name: "olmguard-webhook", Path: ptr.To("/x")},
			},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			AdmissionReviewVersions: []string{"v1"},
			// Matches nothing: this test only checks the caBundle.
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"example.invalid"}, APIVersions: []string{"v1"}, Resources: []string{"nothing"}},
			}},
		}},
	}
}

func caBundleOf(t *testing.T, c client.Client, name string) []byte {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, cfg); err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return cfg.Webhooks[0].ClientConfig.CABundle
}

func TestRotatorAgainstAPIServer(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	c := env.Client
	ns := olmguard.DefaultNamespace
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{olmguard.MutatingWebhookConfigurationName, "someone-else"} {
		if err := c.Create(ctx, webhookConfig(name)); err != nil {
			t.Fatal(err)
		}
	}

	clk := &clock{now: time.Now()}
	dir := t.TempDir()
	opts := certs.DefaultOptions()
	opts.CADuration, opts.CertDuration = 300*time.Hour, 30*time.Hour
	opts.CertDir = dir
	opts.Now = clk.Now
	newRotator := func() *certs.Rotator {
		r, err := certs.NewRotator(c, opts)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	readSecret := func() *corev1.Secret {
		s := &corev1.Secret{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: olmguard.WebhookTLSSecretName}, s); err != nil {
			t.Fatalf("reading the Secret: %v", err)
		}
		return s
	}

	// First start: the Secret is created, files written, CA injected into olmguard's configuration only.
	b1, err := newRotator().Sync(ctx)
	if err != nil {
		t.Fatalf("first Sync: %v", err)
	}
	s1 := readSecret()
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt", "ca.key"} {
		if len(s1.Data[k]) == 0 {
			t.Errorf("Secret has no %s", k)
		}
	}
	if s1.Type != corev1.SecretTypeTLS || s1.Labels[olmguard.NameLabel] != olmguard.Name {
		t.Errorf("Secret type %q labels %v, want kubernetes.io/tls and %s=%s", s1.Type, s1.Labels, olmguard.NameLabel, olmguard.Name)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "tls.crt")); !bytes.Equal(got, b1.Cert) {
		t.Error("tls.crt in the cert dir is not the Secret's")
	}
	if !bytes.Equal(caBundleOf(t, c, olmguard.MutatingWebhookConfigurationName), b1.CACert) {
		t.Error("the CA bundle was not injected into olmguard's configuration")
	}
	if len(caBundleOf(t, c, "someone-else")) != 0 {
		t.Error("another configuration was modified")
	}

	// Restart: the Secret is reused as is.
	b2, err := newRotator().Sync(ctx)
	if err != nil {
		t.Fatalf("Sync after restart: %v", err)
	}
	if s2 := readSecret(); s2.ResourceVersion != s1.ResourceVersion || !bytes.Equal(b2.Cert, b1.Cert) {
		t.Error("a valid Secret was not reused")
	}

	// Near the serving certificate's expiry: only the serving certificate is renewed.
	clk.Set(clk.Now().Add(opts.CertDuration * 7 / 10))
	b3, err := newRotator().Sync(ctx)
	if err != nil {
		t.Fatalf("Sync near expiry: %v", err)
	}
	if bytes.Equal(b3.Cert, b1.Cert) || !bytes.Equal(b3.CACert, b1.CACert) {
		t.Error("want a new serving certificate from the same CA")
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "tls.crt")); !bytes.Equal(got, b3.Cert) {
		t.Error("the renewed certificate was not written to the cert dir")
	}

	// Near the CA's expiry: a new CA, injected with the old one still trusted.
	clk.Set(clk.Now().Add(opts.CADuration * 7 / 10))
	b4, err := newRotator().Sync(ctx)
	if err != nil {
		t.Fatalf("Sync near CA expiry: %v", err)
	}
	if bytes.Equal(b4.CAKey, b1.CAKey) {
		t.Error("the CA was not renewed")
	}
	injected := caBundleOf(t, c, olmguard.MutatingWebhookConfigurationName)
	if !bytes.Equal(injected, b4.CACert) {
		t.Error("the new CA bundle was not injected")
	}
	if cas, err := pki.DecodeX509CertificateSetBytes(injected); err != nil || len(cas) != 2 {
		t.Errorf("injected bundle has %d CAs (err %v), want the new and the previous", len(cas), err)
	}
}

func TestRotatorReplicasConverge(t *testing.T) {
	env := testenv.Shared(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "replicas"}}); err != nil {
		t.Fatal(err)
	}
	opts := certs.DefaultOptions()
	opts.Namespace = "replicas"
	var wg sync.WaitGroup
	bundles := make([]*certs.Bundle, 3)
	errs := make([]error, 3)
	for i := range bundles {
		wg.Go(func() {
			r, err := certs.NewRotator(env.Client, opts)
			if err == nil {
				bundles[i], err = r.Ensure(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i := range bundles {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if !bytes.Equal(bundles[i].Cert, bundles[0].Cert) {
			t.Errorf("replica %d ended with another certificate", i)
		}
	}
}

func TestRotatorRenewsWhileRunning(t *testing.T) {
	env := testenv.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "running"}}); err != nil {
		t.Fatal(err)
	}
	opts := certs.DefaultOptions()
	opts.Namespace = "running"
	opts.CertDir = t.TempDir()
	opts.CADuration, opts.CertDuration = time.Hour, 3*time.Second
	r, err := certs.NewRotator(env.Client, opts)
	if err != nil {
		t.Fatal(err)
	}
	first, err := r.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	deadline := time.Now().Add(testenv.Patience)
	for {
		got, _ := os.ReadFile(filepath.Join(opts.CertDir, "tls.crt"))
		if len(got) > 0 && !bytes.Equal(got, first.Cert) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running rotator did not renew a certificate about to expire")
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start returned %v on cancel, want nil", err)
	}
}

// A CA rollover puts the new CA into the configurations, then waits TrustDelay before the server's
// files change, so no apiserver meets a certificate signed by a CA it does not trust yet. The first
// sync, with nothing served, does not wait.
func TestRotatorWaitsForTrustBeforeServingNewCA(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx := context.Background()
	ns, cfgName := "trust-delay", "trust-delay-config"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, webhookConfig(cfgName)); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	opts := certs.DefaultOptions()
	opts.Namespace, opts.MutatingWebhookConfigurations, opts.ValidatingWebhookConfigurations = ns, []string{cfgName}, nil
	opts.CADuration, opts.CertDuration = 3*time.Hour, time.Hour
	opts.CertDir = t.TempDir()
	opts.Now = clk.Now
	// A pause no test outlasts: a sync that waits it ends only when its context does.
	opts.TrustDelay = time.Hour
	r, err := certs.NewRotator(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	syncCtx, cancel := context.WithTimeout(ctx, testenv.Patience)
	first, err := r.Sync(syncCtx)
	cancel()
	if err != nil {
		t.Fatalf("first sync, nothing served yet: %v (it must not wait the trust delay)", err)
	}

	served := func() []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(opts.CertDir, "tls.crt"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// A rollover: the new CA is injected, then the sync pauses with the old files still served.
	clk.Set(clk.Now().Add(150 * time.Minute)) // past 2/3 of the CA's lifetime
	pausedCtx, stopPause := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { _, err := r.Sync(pausedCtx); done <- err }()
	deadline := time.Now().Add(testenv.Patience)
	for bytes.Equal(caBundleOf(t, c, cfgName), first.CACert) {
		if time.Now().After(deadline) {
			t.Fatal("the new CA was never injected")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !bytes.Equal(served(), first.Cert) {
		t.Fatal("the certificate of the new CA was written as soon as its CA was injected")
	}
	// Ended during its pause, the sync has written nothing.
	stopPause()
	if err := <-done; err == nil {
		t.Fatal("a sync ended during its trust delay reported success")
	}
	if !bytes.Equal(served(), first.Cert) {
		t.Fatal("a sync ended during its trust delay wrote the certificate of the new CA")
	}

	// With a short pause, the next rollover's sync writes the new certificate once it is over.
	opts.TrustDelay = time.Second
	if r, err = certs.NewRotator(c, opts); err != nil {
		t.Fatal(err)
	}
	clk.Set(clk.Now().Add(130 * time.Minute)) // past 2/3 of the lifetime of the CA of the first rollover
	before := served()
	began := time.Now()
	syncCtx, cancel = context.WithTimeout(ctx, testenv.Patience)
	defer cancel()
	if _, err := r.Sync(syncCtx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took < opts.TrustDelay {
		t.Errorf("the sync returned after %s, before its %s trust delay", took, opts.TrustDelay)
	}
	if bytes.Equal(served(), before) {
		t.Fatal("the new certificate was not written after the pause")
	}
}
