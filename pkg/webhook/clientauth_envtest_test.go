package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/olmguard/olmguard/certs"
	"github.com/olmguard/olmguard/internal/tlsconfig/tlstest"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/webhook"
	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestClientAuthThroughAPIServer runs the webhook with --client-ca-file behind a real
// kube-apiserver configured as docs/webhook-auth.md says (an AdmissionConfiguration whose
// kubeconfig gives the apiserver a client certificate for the webhook's address): the apiserver's
// calls are answered (an InstallPlan gets its Subscription owner), while an AdmissionReview forged
// and POSTed straight to the port (no certificate, a certificate of the CA with another CommonName,
// a certificate of another CA with the right CommonName) is refused with 403 and its answer names
// no Subscription.
//
// Fails before the fix: without --client-ca-file (the old server, which had no such flag), the
// forged review is answered 200 with a patch holding the victim's Subscription name and UID
// (checked by running this test with ClientCAFile left empty).
func TestClientAuthThroughAPIServer(t *testing.T) {
	dir := testbin.Require(t, "kube-apiserver", "etcd")
	ctx := context.Background()
	tmp := t.TempDir()
	ca, otherCA := tlstest.NewCA(t, "webhook-client-ca"), tlstest.NewCA(t, "other-ca")
	apiserverCert := ca.Issue(t, "kube-apiserver", time.Time{})
	port, healthPort := testenv.FreePort(t), testenv.FreePort(t)
	host := fmt.Sprintf("127.0.0.1:%d", port)

	// The apiserver side: its webhook client certificate, chosen by the webhook's host:port (in a
	// cluster, the Service's DNS name olmguard-webhook.olmguard-system.svc).
	kc := clientcmdapi.NewConfig()
	kc.AuthInfos[host] = &clientcmdapi.AuthInfo{ClientCertificateData: apiserverCert.CertPEM, ClientKeyData: apiserverCert.KeyPEM}
	kubeconfig := filepath.Join(tmp, "webhook-kubeconfig.yaml")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	admissionConfig := filepath.Join(tmp, "admission.yaml")
	var plugins strings.Builder
	for _, p := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"} {
		fmt.Fprintf(&plugins, "  - name: %s\n    configuration:\n      apiVersion: apiserver.config.k8s.io/v1\n      kind: WebhookAdmissionConfiguration\n      kubeConfigFile: %q\n", p, kubeconfig)
	}
	if err := os.WriteFile(admissionConfig, []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"+plugins.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	env, err := testenv.StartConfigured(dir, nil, func(a *envtest.APIServer) {
		a.Configure().Set("admission-control-config-file", admissionConfig)
	})
	if err != nil {
		t.Fatalf("starting a kube-apiserver with %s: %v", admissionConfig, err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c := env.Client
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "victim"}}); err != nil {
		t.Fatal(err)
	}
	sub := &v1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "victims-secret-operator", Namespace: "victim"},
		Spec:       v1alpha1.SubscriptionSpec{CatalogSource: "cat", CatalogSourceNamespace: "olm", Package: "op"},
	}
	if err := c.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}

	// The webhook side: --self-signed serving certificate, --client-ca-file, the default
	// --client-cn-names (kube-apiserver), the real admission handlers.
	caFile := filepath.Join(tmp, "client-ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	o := webhook.DefaultOptions()
	o.SelfSigned = true
	o.Port = port
	o.RegisterURL = "https://" + host
	o.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", healthPort)
	o.MetricsBindAddress = "0"
	o.ClientCAFile = caFile
	o.Endpoints = setup.DefaultWebhook().Admission()
	s, err := webhook.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	started(t, s, healthPort)

	refused := metrics.WebhookRequestsRefused.WithLabelValues(webhook.RefusedUnauthenticated)
	t.Run("the apiserver's calls are answered", func(t *testing.T) {
		// The apiserver applies new webhook configurations a moment after they are written:
		// create plans until one is mutated. Every create succeeds (failurePolicy Ignore).
		before := testutil.ToFloat64(refused)
		defer func() {
			if got := testutil.ToFloat64(refused) - before; got != 0 {
				t.Errorf("%v of the apiserver's calls were refused", got)
			}
		}()
		deadline := time.Now().Add(testenv.Patience)
		for {
			ip := installPlan("victim")
			if err := c.Create(ctx, ip); err != nil {
				t.Fatalf("creating an InstallPlan: %v", err)
			}
			if len(ip.OwnerReferences) == 1 && ip.OwnerReferences[0].UID == sub.UID {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no InstallPlan got its Subscription owner within %s (last: %+v)", testenv.Patience, ip.OwnerReferences)
			}
			time.Sleep(200 * time.Millisecond)
		}
	})

	// A forged review of a new InstallPlan in victim: answered by the old server with a patch
	// adding victim's Subscription (name and UID) as owner.
	plan := installPlan("victim")
	plan.UID = "forged-plan-uid"
	raw, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	review, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       types.UID("forged"),
			Kind:      metav1.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "InstallPlan"},
			Resource:  metav1.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "installplans"},
			Namespace: "victim", Name: plan.Name, Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
	}{
		{"no client certificate", nil},
		{"the client CA, another CommonName", []tls.Certificate{ca.Issue(t, "mallory", time.Time{}).TLS}},
		{"another CA, CommonName kube-apiserver", []tls.Certificate{otherCA.Issue(t, "kube-apiserver", time.Time{}).TLS}},
	} {
		t.Run("forged review, "+tc.name, func(t *testing.T) {
			// The attacker does not care who the server is.
			hc := &http.Client{Timeout: testenv.Patience, Transport: &http.Transport{TLSClientConfig: &tls.Config{
				InsecureSkipVerify: true, Certificates: tc.certs, //nolint:gosec // a forging client
			}}}
			before := testutil.ToFloat64(refused)
			resp, err := hc.Post("https://"+host+olmguard.MutateInstallPlansPath, "application/json", bytes.NewReader(review))
			if err != nil {
				// A TLS failure is a refusal too; the server answers 403 after the handshake.
				t.Fatalf("POST: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("status %d, want 403; body %s", resp.StatusCode, body)
			}
			// The patch of an AdmissionReview answer is base64: read it decoded too.
			seen := append([]byte(nil), body...)
			var answer admissionv1.AdmissionReview
			if json.Unmarshal(body, &answer) == nil && answer.Response != nil {
				seen = append(seen, answer.Response.Patch...)
			}
			for _, secret := range []string{sub.Name, string(sub.UID)} {
				if bytes.Contains(seen, []byte(secret)) {
					t.Errorf("the answer holds victim's Subscription %q: %s", secret, seen)
				}
			}
			if got := testutil.ToFloat64(refused) - before; got != 1 {
				t.Errorf("refused (unauthenticated) rose by %v, want 1", got)
			}
		})
	}
}

// TestClientAuthCertDir: client authentication in --cert-dir mode, and a client CA file replaced
// in place (a mounted ConfigMap updated) is used from the next call on, without a restart.
func TestClientAuthCertDir(t *testing.T) {
	env := testenv.Shared(t)
	spec := certs.Spec{
		ServiceName: olmguard.WebhookServiceName, Namespace: olmguard.DefaultNamespace,
		ExtraIPs: []net.IP{net.ParseIP("127.0.0.1")}, CADuration: time.Hour, CertDuration: time.Hour,
	}
	serving, err := certs.NewBundle(spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	certDir, tmp := t.TempDir(), t.TempDir()
	if err := certs.WriteFiles(certDir, serving); err != nil {
		t.Fatal(err)
	}
	a, b := tlstest.NewCA(t, "client-ca-a"), tlstest.NewCA(t, "client-ca-b")
	caFile := filepath.Join(tmp, "ca.crt")
	if err := os.WriteFile(caFile, a.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	port, healthPort := testenv.FreePort(t), testenv.FreePort(t)
	rec := &recorder{}
	o := webhook.DefaultOptions()
	o.CertDir = certDir
	o.Port = port
	o.HealthProbeBindAddress = fmt.Sprintf("127.0.0.1:%d", healthPort)
	o.MetricsBindAddress = "0"
	o.ClientCAFile = caFile
	o.ClientCNNames = []string{"kube-apiserver", "apiserver-b"}
	o.Endpoints = rec.endpoints()
	s, err := webhook.New(env.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	started(t, s, healthPort)

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(serving.CACert)
	ip := installPlan("tenant")
	raw, _ := json.Marshal(ip)
	review, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "r", Kind: metav1.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "InstallPlan"},
			Resource:  metav1.GroupVersionResource{Group: "operators.coreos.com", Version: "v1alpha1", Resource: "installplans"},
			Namespace: ip.Namespace, Name: ip.Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
		},
	})
	status := func(cert *tlstest.Client) int {
		t.Helper()
		cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
		if cert != nil {
			cfg.Certificates = []tls.Certificate{cert.TLS}
		}
		hc := &http.Client{Timeout: testenv.Patience, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
		resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d%s", port, olmguard.MutateInstallPlansPath), "application/json", bytes.NewReader(review))
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name string
		cert *tlstest.Client
		want int
	}{
		{"CA a, kube-apiserver", a.Issue(t, "kube-apiserver", time.Time{}), http.StatusOK},
		{"CA a, the second name", a.Issue(t, "apiserver-b", time.Time{}), http.StatusOK},
		{"CA a, another name", a.Issue(t, "tenant", time.Time{}), http.StatusForbidden},
		{"CA b, kube-apiserver", b.Issue(t, "kube-apiserver", time.Time{}), http.StatusForbidden},
		{"no certificate", nil, http.StatusForbidden},
	} {
		if got := status(tc.cert); got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}

	// The CA file now holds CA b (explicit times: both writes may fall in one timestamp tick).
	if err := os.WriteFile(caFile, b.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(caFile, later, later); err != nil {
		t.Fatal(err)
	}
	if got := status(b.Issue(t, "kube-apiserver", time.Time{})); got != http.StatusOK {
		t.Errorf("CA b after the file changed: status %d, want 200", got)
	}
	if got := status(a.Issue(t, "kube-apiserver", time.Time{})); got != http.StatusForbidden {
		t.Errorf("CA a after the file changed: status %d, want 403", got)
	}
}
