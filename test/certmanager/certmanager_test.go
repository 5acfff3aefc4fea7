package certmanager_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/certmanager"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestOverlayCertificateIssuedAndInjected runs cert-manager's controllers against a control plane
// with the cert-manager overlay's Issuer, Certificate and webhook configurations: the serving
// Secret is issued for the webhook Service's names and its CA injected into every webhook of both
// configurations; when the Secret is lost, cert-manager issues a new one and the injection
// follows it. (It proves the assembled controllers work, before the real-node tier relies on
// them.)
func TestOverlayCertificateIssuedAndInjected(t *testing.T) {
	env := testenv.Start(t)
	certmanager.InstallCRDs(t, env.Client)
	certmanager.Run(t, testenv.WriteKubeconfig(t, env.Config))

	objs, err := manifests.Objects("cert-manager", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "Issuer", "Certificate", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			o.SetManagedFields(nil)
			//nolint:staticcheck // server-side apply as kubectl does it; Client.Apply takes no field validation
			if err := env.Client.Patch(ctx, o, client.Apply, client.FieldOwner("olmguard-test"), client.ForceOwnership); err != nil {
				t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
			}
		}
	}

	t.Cleanup(func() {
		if t.Failed() {
			certmanager.LogState(t, env.Client, olmguard.DefaultNamespace)
		}
	})
	secret := client.ObjectKey{Namespace: olmguard.DefaultNamespace, Name: "olmguard-webhook-cert"}
	first := waitInjected(t, env.Client, secret, nil)
	cert := parseCert(t, first.Data["tls.crt"])
	for _, name := range []string{"olmguard-webhook.olmguard-system.svc", "olmguard-webhook.olmguard-system.svc.cluster.local"} {
		if !slices.Contains(cert.DNSNames, name) {
			t.Errorf("the issued certificate lacks %s: %v", name, cert.DNSNames)
		}
	}

	// cert-manager's trigger ignores a lost Secret while it sees the Certificate's issuance in
	// progress, and nothing requeues it after (its Secret and Certificate informers may lag each
	// other under load): lose the Secret only once the issuance is over as the apiserver has it.
	waitIssuanceDone(t, env.Client, "olmguard-webhook")
	if err := env.Client.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secret.Namespace, Name: secret.Name}}); err != nil {
		t.Fatal(err)
	}
	waitInjected(t, env.Client, secret, first.Data["ca.crt"])
}

// waitInjected waits until the Secret holds a CA other than previous and every webhook of both
// configurations trusts it, and returns the Secret.
func waitInjected(t *testing.T, c client.Client, key client.ObjectKey, previous []byte) *corev1.Secret {
	t.Helper()
	var s *corev1.Secret
	testenv.Eventually(t, "serving Secret issued and its CA injected into every webhook", func(ctx context.Context) (bool, error) {
		s = &corev1.Secret{}
		if err := c.Get(ctx, key, s); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		ca := s.Data["ca.crt"]
		if len(ca) == 0 || len(s.Data["tls.crt"]) == 0 || bytes.Equal(ca, previous) {
			return false, nil
		}
		var bundles [][]byte
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, mwc); err != nil {
			return false, err
		}
		for _, w := range mwc.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: olmguard.ValidatingWebhookConfigurationName}, vwc); err != nil {
			return false, err
		}
		for _, w := range vwc.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, b := range bundles {
			// cert-manager's injector keeps the CAs it injected before beside the new one
			// while they are valid, so that pods still serving the old certificate stay trusted.
			if !bytes.Contains(b, bytes.TrimSpace(ca)) {
				return false, nil
			}
		}
		return len(bundles) > 0, nil
	})
	return s
}

func parseCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		t.Fatal("no PEM block in the issued certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// waitIssuanceDone waits until Certificate name is Ready at revision 1 or later with no issuance
// in progress.
func waitIssuanceDone(t *testing.T, c client.Client, name string) {
	t.Helper()
	testenv.Eventually(t, "Certificate "+name+" issued, no issuance in progress", func(ctx context.Context) (bool, error) {
		crt := &unstructured.Unstructured{}
		crt.SetAPIVersion("cert-manager.io/v1")
		crt.SetKind("Certificate")
		if err := c.Get(ctx, client.ObjectKey{Namespace: olmguard.DefaultNamespace, Name: name}, crt); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if rev, _, _ := unstructured.NestedInt64(crt.Object, "status", "revision"); rev < 1 {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(crt.Object, "status", "conditions")
		ready := false
		for _, c := range conds {
			m, _ := c.(map[string]any)
			switch {
			case m["type"] == "Issuing" && m["status"] == "True":
				return false, nil
			case m["type"] == "Ready" && m["status"] == "True":
				ready = true
			}
		}
		return ready, nil
	})
}
