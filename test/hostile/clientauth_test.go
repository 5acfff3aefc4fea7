package hostile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// clientAuthEnv, when "1", runs the tier with the webhook authenticating the kube-apiserver's
// calls (item 3's fix: --client-ca-file, --client-cn-names): the cluster's kube-apiserver gets an
// AdmissionConfiguration whose kubeconfig presents a client certificate of a CA of the test's, and
// a forged review without it must be refused. Off, the webhook runs with default flags, which
// answer anyone (docs/webhook-auth.md): the forged reviews show the leak.
const clientAuthEnv = "OLMGUARD_HOSTILE_CLIENT_AUTH"

// clientCN is the CommonName of the kube-apiserver's client certificate.
const clientCN = "olmguard-hostile-kube-apiserver"

// clientAuth is the setting of the run: empty caFile when off.
var clientAuth struct {
	caFile string
}

// setUpClientAuth writes, under dir, a CA, a client certificate of it for clientCN, the
// kubeconfig the kube-apiserver presents it with to every webhook (user "*"), and the
// AdmissionConfiguration naming that kubeconfig for both webhook plugins. It returns the
// configuration's path, for --admission-control-config-file.
func setUpClientAuth(dir string) (string, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "olmguard-hostile-client-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: clientCN},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", err
	}
	files := map[string][]byte{
		"ca.crt":     pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		"client.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		"client.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
	files["webhook.kubeconfig"] = []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
users:
- name: "*"
  user:
    client-certificate: %q
    client-key: %q
`, filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")))
	plugin := func(name string) string {
		return fmt.Sprintf(`- name: %s
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %q
`, name, filepath.Join(dir, "webhook.kubeconfig"))
	}
	files["admission.yaml"] = []byte("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n" +
		plugin("ValidatingAdmissionWebhook") + plugin("MutatingAdmissionWebhook"))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	clientAuth.caFile = filepath.Join(dir, "ca.crt")
	return filepath.Join(dir, "admission.yaml"), nil
}

// webhookAuthArgs are the webhook's flags of the setting.
func webhookAuthArgs() []string {
	if clientAuth.caFile == "" {
		return nil
	}
	return []string{"--client-ca-file=" + clientAuth.caFile, "--client-cn-names=" + clientCN}
}
