package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/certs"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/webhook"
	"github.com/olmguard/olmguard/test/testenv"
)

// The tests of this package share one control plane and run one after another: each registers
// olmguard's two configurations (there is one of each per cluster) and removes them at the end.
func TestMain(m *testing.M) {
	testenv.LogWhenVerbose()
	testenv.Main(m, func(e *testenv.Env) (func() error, error) {
		for _, ns := range []string{olmguard.DefaultNamespace, "tenant"} {
			if err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
}

// recorder records the admission requests of every path and allows them.
type recorder struct {
	mu   sync.Mutex
	seen map[string][]string // path -> "OPERATION namespace/name"
}

// endpoints is olmguard's admission table with every handler replaced by the recorder.
func (r *recorder) endpoints() []admit.Endpoint {
	r.seen = map[string][]string{}
	eps := setup.DefaultWebhook().Admission()
	for i := range eps {
		path := eps[i].Path
		eps[i].Handler = admit.Static(admit.Untyped(admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.seen[path] = append(r.seen[path], fmt.Sprintf("%s %s/%s", req.Operation, req.Namespace, req.Name))
			return admission.Allowed("")
		})))
	}
	return eps
}

func (r *recorder) saw(path string, op admissionv1.Operation, ns, name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.seen[path] {
		if s == fmt.Sprintf("%s %s/%s", op, ns, name) {
			return true
		}
	}
	return false
}

// started runs s until the test ends and waits until /readyz answers 200.
func started(t *testing.T, s *webhook.Server, healthPort int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v after cancel, want nil", err)
			}
		case <-time.After(testenv.Patience):
			t.Errorf("the server did not stop within %s", testenv.Patience)
		}
	})
	url := fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort)
	deadline := time.Now().Add(testenv.Patience)
	for {
		select {
		case err := <-done:
			t.Fatalf("server stopped before becoming ready: %v", err)
		default:
		}
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 within %s", testenv.Patience)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func removeConfigurations(t *testing.T, c client.Client) {
	t.Cleanup(func() {
		ctx := context.Background()
		_ = c.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: olmguard.MutatingWebhookConfigurationName}})
		_ = c.Delete(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: olmguard.ValidatingWebhookConfigurationName}})
	})
}

// names numbers objects: with generateName, admission requests carry no name yet.
var names atomic.Int64

func name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, names.Add(1)) }

func installPlan(ns string) *v1alpha1.InstallPlan {
	return &v1alpha1.InstallPlan{
		ObjectMeta: metav1.ObjectMeta{Name: name("ip"), Namespace: ns},
		Spec:       v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"op.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true},
	}
}

// eventually creates objects from make until the apiserver sends one to path: the apiserver
// applies a new webhook configuration a moment after it is written. Every create must succeed.
func eventually(t *testing.T, c client.Client, r *recorder, path string, make func() client.Object) {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	for {
		obj := make()
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("creating %T through the webhook: %v", obj, err)
		}
		if r.saw(path, admissionv1.Create, obj.GetNamespace(), obj.GetName()) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the apiserver never sent a request to %s", path)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func csv(name string, labels, annotations map[string]string, finalizers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
		"metadata": map[string]any{"name": name, "namespace": "tenant"},
		"spec": map[string]any{
			"displayName": name, "install": map[string]any{"strategy": "deployment"},
			"apiservicedefinitions": map[string]any{}, "customresourcedefinitions": map[string]any{},
			"cleanup": map[string]any{"enabled": false},
		},
	}}
	u.SetLabels(labels)
	u.SetAnnotations(annotations)
	u.SetFinalizers(finalizers)
	return u
}

func job(name string, labels map[string]string) *batchv1.Job {
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", Labels: labels},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "c", Image: "example.invalid/unpack"}},
		}}},
	}
}

func scrape(t *testing.T, port int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		t.Fatalf("scraping /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func TestSelfSignedServerAdmitsThroughAPIServer(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx := context.Background()
	removeConfigurations(t, c)

	port, healthPort, metricsPort := testenv.FreePort(t), testenv.FreePort(t), testenv.FreePort(t)
	rec := &recorder{}
	o := webhook.DefaultOptions()
	o.SelfSigned = true
	o.Port = port
	o.RegisterURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	o.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", healthPort)
	o.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", metricsPort)
	o.MetricsSecure = false // scraped over HTTP here; authorization is tested with the controller
	o.Endpoints = rec.endpoints()
	s, err := webhook.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReadyCheck(httptest.NewRequest(http.MethodGet, "/readyz", nil)); err == nil {
		t.Fatal("ready before Start")
	}
	started(t, s, healthPort)
	if err := s.ReadyCheck(httptest.NewRequest(http.MethodGet, "/readyz", nil)); err != nil {
		t.Errorf("not ready after /readyz answered 200: %v", err)
	}

	// The configurations call the register URL and trust the CA kept in the Secret.
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: olmguard.DefaultNamespace, Name: olmguard.WebhookTLSSecretName}, secret); err != nil {
		t.Fatalf("reading the TLS Secret: %v", err)
	}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, m); err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		if w.ClientConfig.URL == nil || !strings.HasPrefix(*w.ClientConfig.URL, o.RegisterURL+"/mutate/") {
			t.Errorf("%s: URL %v, want under %s", w.Name, w.ClientConfig.URL, o.RegisterURL)
		}
		if !bytes.Equal(w.ClientConfig.CABundle, secret.Data["ca.crt"]) {
			t.Errorf("%s: caBundle is not the Secret's ca.crt", w.Name)
		}
	}

	// An InstallPlan goes through the apiserver, which sends an AdmissionReview the server answers.
	allowed := metrics.WebhookRequests.WithLabelValues(olmguard.MutateInstallPlansPath, admit.ResultAllowed)
	before := testutil.ToFloat64(allowed)
	eventually(t, c, rec, olmguard.MutateInstallPlansPath, func() client.Object { return installPlan("tenant") })
	if testutil.ToFloat64(allowed) <= before {
		t.Error("the requests counter did not increase")
	}
	want := fmt.Sprintf(`olmguard_webhook_requests_total{path=%q,result="allowed"}`, olmguard.MutateInstallPlansPath)
	if body := scrape(t, metricsPort); !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	eventually(t, c, rec, olmguard.ValidateSubscriptionsPath, func() client.Object {
		return &v1alpha1.Subscription{
			ObjectMeta: metav1.ObjectMeta{Name: name("sub"), Namespace: "tenant"},
			Spec:       v1alpha1.SubscriptionSpec{CatalogSource: "cat", CatalogSourceNamespace: "olm", Package: "op"},
		}
	})

	// Both configurations are now in effect: check what the selectors and matchConditions send.
	t.Run("namespaces excluded", func(t *testing.T) {
		ip := installPlan(olmguard.DefaultNamespace)
		if err := c.Create(ctx, ip); err != nil {
			t.Fatal(err)
		}
		if rec.saw(olmguard.MutateInstallPlansPath, admissionv1.Create, ip.Namespace, ip.Name) {
			t.Error("an InstallPlan in olmguard's namespace was sent")
		}
	})
	t.Run("CSVs", func(t *testing.T) {
		for _, tc := range []struct {
			obj  *unstructured.Unstructured
			sent bool
		}{
			{csv("plain", nil, nil), true},
			{csv("has-finalizer", nil, nil, olmguard.CleanupFinalizer), false},
			{csv("opted-out", nil, map[string]string{olmguard.CleanupAnnotation: olmguard.CleanupDisabled}), false},
			{csv("other-annotation", nil, map[string]string{olmguard.CleanupAnnotation: "enabled"}), true},
			{csv("copied", map[string]string{"olm.copiedFrom": "ns"}, nil), false},
		} {
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Fatalf("creating CSV %s: %v", tc.obj.GetName(), err)
			}
			if got := rec.saw(olmguard.MutateClusterServiceVersionsPath, admissionv1.Create, "tenant", tc.obj.GetName()); got != tc.sent {
				t.Errorf("CSV %s: sent=%v, want %v", tc.obj.GetName(), got, tc.sent)
			}
		}
		// Removing olmguard's finalizer is validated; other updates are not.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("ClusterServiceVersion"))
		if err := c.Get(ctx, client.ObjectKey{Namespace: "tenant", Name: "has-finalizer"}, u); err != nil {
			t.Fatal(err)
		}
		u.SetLabels(map[string]string{"touched": "yes"})
		if err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		if rec.saw(olmguard.ValidateClusterServiceVersionsPath, admissionv1.Update, "tenant", "has-finalizer") {
			t.Error("an update keeping the finalizer was sent to validation")
		}
		if rec.saw(olmguard.MutateClusterServiceVersionsPath, admissionv1.Update, "tenant", "has-finalizer") {
			t.Error("an update of a CSV that has the finalizer was sent to mutation")
		}
		u.SetFinalizers(nil)
		if err := c.Update(ctx, u); err != nil {
			t.Fatal(err)
		}
		if !rec.saw(olmguard.ValidateClusterServiceVersionsPath, admissionv1.Update, "tenant", "has-finalizer") {
			t.Error("removing the finalizer was not sent to validation")
		}
	})
	t.Run("Jobs", func(t *testing.T) {
		unpack := map[string]string{"operatorframework.io/bundle-unpack-ref": "abc", "olm.managed": "true"}
		for _, tc := range []struct {
			obj  *batchv1.Job
			sent bool
		}{
			{job("unpack", unpack), true},
			{job("no-labels", nil), false},
			{job("not-managed", map[string]string{"operatorframework.io/bundle-unpack-ref": "abc"}), false},
		} {
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Fatalf("creating Job %s: %v", tc.obj.Name, err)
			}
			if got := rec.saw(olmguard.MutateJobsPath, admissionv1.Create, "tenant", tc.obj.Name); got != tc.sent {
				t.Errorf("Job %s: sent=%v, want %v", tc.obj.Name, got, tc.sent)
			}
		}
	})
	t.Run("InstallPlan updates are validated", func(t *testing.T) {
		ip := installPlan("tenant")
		if err := c.Create(ctx, ip); err != nil {
			t.Fatal(err)
		}
		ip.Spec.Approved = false
		if err := c.Update(ctx, ip); err != nil {
			t.Fatal(err)
		}
		if !rec.saw(olmguard.ValidateInstallPlansPath, admissionv1.Update, "tenant", ip.Name) {
			t.Error("an InstallPlan update was not sent to validation")
		}
	})
}

func TestCertDirHotReload(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx := context.Background()
	removeConfigurations(t, c)

	spec := certs.Spec{
		ServiceName: olmguard.WebhookServiceName, Namespace: olmguard.DefaultNamespace,
		ExtraIPs: []net.IP{net.ParseIP("127.0.0.1")}, CADuration: time.Hour, CertDuration: time.Hour,
	}
	first, err := certs.NewBundle(spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := certs.WriteFiles(dir, first); err != nil {
		t.Fatal(err)
	}

	port, healthPort := testenv.FreePort(t), testenv.FreePort(t)
	rec := &recorder{}
	o := webhook.DefaultOptions()
	o.CertDir = dir
	o.Port = port
	o.RegisterURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	o.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", healthPort)
	o.MetricsBindAddress = "0"
	o.Endpoints = rec.endpoints()
	s, err := webhook.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	started(t, s, healthPort)

	served := func(b *certs.Bundle, cfg *tls.Config) (*x509.Certificate, error) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b.CACert)
		cfg.RootCAs, cfg.ServerName = pool, "127.0.0.1"
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), cfg)
		if err != nil {
			return nil, err
		}
		defer func() { _ = conn.Close() }()
		st := conn.ConnectionState()
		if st.NegotiatedProtocol == "h2" {
			t.Error("HTTP/2 was negotiated")
		}
		return st.PeerCertificates[0], nil
	}
	if _, err := served(first, &tls.Config{NextProtos: []string{"h2", "http/1.1"}}); err != nil {
		t.Fatalf("TLS with the first certificate: %v", err)
	}
	if _, err := served(first, &tls.Config{MaxVersion: tls.VersionTLS11}); err == nil {
		t.Error("TLS 1.1 was accepted")
	}
	caBundle := func() []byte {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, m); err != nil {
			t.Fatal(err)
		}
		return m.Webhooks[0].ClientConfig.CABundle
	}
	if !bytes.Equal(caBundle(), first.CACert) {
		t.Error("registration did not use ca.crt from the cert dir")
	}
	eventually(t, c, rec, olmguard.MutateInstallPlansPath, func() client.Object { return installPlan("tenant") })

	// Replace the certificate, with a new CA: the server serves it without a restart and the
	// configurations are re-registered with the new CA.
	second, err := certs.NewBundle(spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.WriteFiles(dir, second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testenv.Patience)
	for {
		leaf, err := served(second, &tls.Config{})
		if err == nil && bytes.Equal(leaf.Raw, mustLeaf(t, second).Raw) && bytes.Equal(caBundle(), second.CACert) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replaced certificate was not picked up within %s (last error: %v)", testenv.Patience, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	eventually(t, c, rec, olmguard.MutateInstallPlansPath, func() client.Object { return installPlan("tenant") })
}

func mustLeaf(t *testing.T, b *certs.Bundle) *x509.Certificate {
	t.Helper()
	pair, err := tls.X509KeyPair(b.Cert, b.Key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf
}

// With --self-signed the server keeps its certificate in a Secret of its namespace; a new user
// starting it out of cluster has no such namespace yet, so the server creates it, labelled as the
// manifests label it, instead of exiting.
func TestSelfSignedCreatesItsNamespace(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	const ns = "olmguard-fresh"
	if err := c.Get(context.Background(), client.ObjectKey{Name: ns}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s exists before the test: %v", ns, err)
	}
	healthPort := testenv.FreePort(t)
	o := webhook.DefaultOptions()
	o.SelfSigned, o.Namespace, o.Port = true, ns, testenv.FreePort(t)
	o.HealthProbeBindAddress, o.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", healthPort), "0"
	o.Endpoints = (&recorder{}).endpoints()
	s, err := webhook.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	started(t, s, healthPort)
	got := &corev1.Namespace{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: ns}, got); err != nil {
		t.Fatalf("the server is ready but its namespace is missing: %v", err)
	}
	if got.Labels[olmguard.NameLabel] != olmguard.Name || got.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace labels = %v, want the manifests' labels", got.Labels)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: olmguard.WebhookTLSSecretName}, &corev1.Secret{}); err != nil {
		t.Errorf("the certificate Secret is missing: %v", err)
	}
}
