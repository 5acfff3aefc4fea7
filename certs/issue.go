// Package certs provisions the webhook's serving certificate when no certificate manager is
// installed (--self-signed): it issues a self-signed CA and a serving certificate with cert-manager's
// PKI helpers, keeps both in a Secret so every replica and every restart serves the same chain,
// renews them before they expire, writes them to the server's certificate directory and injects
// the CA bundle into olmguard's own webhook configurations.
package certs

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/cert-manager/cert-manager/pkg/util/pki"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bundle is the PEM-encoded material kept in the Secret and written to the certificate directory.
type Bundle struct {
	// CACert is the trust bundle: the CA that signed Cert first, then, during a CA rollover, the
	// previous CA, so that replicas still serving a certificate of the old CA stay trusted.
	CACert []byte
	// CAKey is the private key of the first certificate in CACert.
	CAKey []byte
	// Cert and Key are the serving certificate and its private key.
	Cert []byte
	Key  []byte
}

// Spec is what the certificates must look like.
type Spec struct {
	// ServiceName and Namespace name the Service the apiserver calls; they give the DNS SANs.
	ServiceName string
	Namespace   string
	// ExtraDNSNames and ExtraIPs are added to the SANs, e.g. 127.0.0.1 for an out-of-cluster server.
	ExtraDNSNames []string
	ExtraIPs      []net.IP
	// CADuration and CertDuration are the lifetimes of new certificates.
	CADuration   time.Duration
	CertDuration time.Duration
}

// Default lifetimes. Rotation is automatic, so they are short enough to be exercised.
const (
	DefaultCADuration   = 3 * 365 * 24 * time.Hour
	DefaultCertDuration = 90 * 24 * time.Hour
)

// maxBackdate bounds how far NotBefore is set in the past, to tolerate clock skew between the
// webhook and the apiserver.
const maxBackdate = 5 * time.Minute

// Validate reports a Spec that cannot produce a usable certificate.
func (s Spec) Validate() error {
	switch {
	case s.ServiceName == "":
		return errors.New("certs: service name is required")
	case s.Namespace == "":
		return errors.New("certs: namespace is required")
	case s.CADuration <= 0:
		return fmt.Errorf("certs: CA duration must be positive, got %s", s.CADuration)
	case s.CertDuration <= 0:
		return fmt.Errorf("certs: certificate duration must be positive, got %s", s.CertDuration)
	}
	return nil
}

// DNSNames returns the DNS SANs of the serving certificate: the Service's two cluster names, then
// the extra names, without duplicates.
func (s Spec) DNSNames() []string {
	names := []string{
		s.ServiceName + "." + s.Namespace + ".svc",
		s.ServiceName + "." + s.Namespace + ".svc.cluster.local",
	}
	for _, n := range s.ExtraDNSNames {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names
}

// IPs returns the IP SANs of the serving certificate, without duplicates.
func (s Spec) IPs() []net.IP {
	var ips []net.IP
	for _, ip := range s.ExtraIPs {
		if ip != nil && !slices.ContainsFunc(ips, ip.Equal) {
			ips = append(ips, ip)
		}
	}
	return ips
}

// NewBundle issues a new CA and a serving certificate signed by it.
func NewBundle(s Spec, now time.Time) (*Bundle, error) {
	caCert, caKey, err := IssueCA(s, now)
	if err != nil {
		return nil, err
	}
	cert, key, err := IssueServing(s, caCert, caKey, now)
	if err != nil {
		return nil, err
	}
	return &Bundle{CACert: caCert, CAKey: caKey, Cert: cert, Key: key}, nil
}

// IssueCA issues a self-signed CA valid for s.CADuration from now. It returns PEM certificate and key.
func IssueCA(s Spec, now time.Time) (certPEM, keyPEM []byte, err error) {
	crt := &cmapi.Certificate{Spec: cmapi.CertificateSpec{
		CommonName: s.ServiceName + "." + s.Namespace + " CA",
		Subject:    &cmapi.X509Subject{Organizations: []string{"olmguard"}},
		IsCA:       true,
		Usages:     []cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageCertSign},
	}}
	return issue(crt, s.CADuration, now, nil, nil)
}

// IssueServing issues a serving certificate for s's SANs, signed by the given CA. It never
// outlives the CA.
func IssueServing(s Spec, caCertPEM, caKeyPEM []byte, now time.Time) (certPEM, keyPEM []byte, err error) {
	ca, err := pki.DecodeX509CertificateBytes(caCertPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: decoding CA certificate: %w", err)
	}
	caKey, err := pki.DecodePrivateKeyBytes(caKeyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: decoding CA key: %w", err)
	}
	dns := s.DNSNames()
	crt := &cmapi.Certificate{Spec: cmapi.CertificateSpec{
		CommonName:  dns[0],
		DNSNames:    dns,
		IPAddresses: pki.IPAddressesToString(s.IPs()),
		Usages:      []cmapi.KeyUsage{cmapi.UsageDigitalSignature, cmapi.UsageServerAuth},
	}}
	return issue(crt, s.CertDuration, now, ca, caKey)
}

// issue signs a certificate for crt with a new ECDSA P-256 key (fast to generate, accepted by every
// apiserver); a nil issuer means self-signed.
func issue(crt *cmapi.Certificate, d time.Duration, now time.Time, issuer *x509.Certificate, issuerKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	crt.Spec.Duration = &metav1.Duration{Duration: d}
	crt.Spec.PrivateKey = &cmapi.CertificatePrivateKey{Algorithm: cmapi.ECDSAKeyAlgorithm, Size: pki.ECCurve256}
	key, err := pki.GeneratePrivateKeyForCertificate(crt)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generating key: %w", err)
	}
	tmpl, err := pki.CertificateTemplateFromCertificate(crt)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: building certificate template: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, nil, fmt.Errorf("certs: generating serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-min(maxBackdate, d/10)).Truncate(time.Second)
	tmpl.NotAfter = now.Add(d).Truncate(time.Second)
	if issuer == nil {
		issuer, issuerKey = tmpl, key
	} else if tmpl.NotAfter.After(issuer.NotAfter) {
		tmpl.NotAfter = issuer.NotAfter
	}
	certPEM, _, err = pki.SignCertificate(tmpl, issuer, key.Public(), issuerKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: signing certificate: %w", err)
	}
	keyPEM, err = pki.EncodePrivateKey(key, cmapi.PKCS8)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: encoding key: %w", err)
	}
	return certPEM, keyPEM, nil
}
