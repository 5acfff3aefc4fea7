package certs

import (
	"crypto/x509"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
)

// Action is what must happen to a Bundle.
type Action int

const (
	// Keep the bundle as it is.
	Keep Action = iota
	// RenewServing issues a new serving certificate with the existing CA, so the CA bundle the
	// apiserver trusts does not change.
	RenewServing
	// RenewAll issues a new CA and serving certificate.
	RenewAll
)

func (a Action) String() string {
	switch a {
	case Keep:
		return "Keep"
	case RenewServing:
		return "RenewServing"
	case RenewAll:
		return "RenewAll"
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Reason says why, for logs and events.
	Reason string
	// RenewAt is, for Keep, when the bundle will next need renewing.
	RenewAt time.Time
}

// Decide compares a bundle (nil when there is none) with the spec at time now. A certificate is
// renewed once less than a third of its lifetime remains (cert-manager's default renewal time),
// when it is not yet valid (the clock moved back), when its key does not match, when the serving
// certificate is not signed by the CA, or when the serving certificate's SANs differ from the spec.
func Decide(b *Bundle, s Spec, now time.Time) Decision {
	if b == nil {
		return Decision{Action: RenewAll, Reason: "no certificate yet"}
	}
	ca, caReason := checkPair(b.CACert, b.CAKey, now)
	if caReason != "" {
		return Decision{Action: RenewAll, Reason: "CA " + caReason}
	}
	if !ca.IsCA {
		return Decision{Action: RenewAll, Reason: "CA certificate is not a CA"}
	}
	caRenew := renewalTime(ca)
	if !now.Before(caRenew) {
		return Decision{Action: RenewAll, Reason: fmt.Sprintf("CA expires at %s", ca.NotAfter.UTC().Format(time.RFC3339))}
	}
	leaf, leafReason := checkPair(b.Cert, b.Key, now)
	if leafReason != "" {
		return Decision{Action: RenewServing, Reason: "serving certificate " + leafReason}
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return Decision{Action: RenewServing, Reason: "serving certificate is not signed by the CA"}
	}
	leafRenew := renewalTime(leaf)
	if !leaf.NotAfter.Before(ca.NotAfter) {
		// Issued when the CA had less life left than a serving certificate gets, so cut at the
		// CA's end: a new one would end there too. It goes with the CA's renewal, which comes
		// first. Without this, its backdated NotBefore can put its renewal in the past and have
		// every replica issue a new one each second until the CA rolls over.
		leafRenew = caRenew
	}
	if !now.Before(leafRenew) {
		return Decision{Action: RenewServing, Reason: fmt.Sprintf("serving certificate expires at %s", leaf.NotAfter.UTC().Format(time.RFC3339))}
	}
	if !sameStrings(leaf.DNSNames, s.DNSNames()) || !sameIPs(leaf.IPAddresses, s.IPs()) {
		return Decision{Action: RenewServing, Reason: "serving certificate SANs changed"}
	}
	return Decision{Action: Keep, Reason: "certificates are valid", RenewAt: earliest(caRenew, leafRenew)}
}

// Renew applies a decision to a bundle. On RenewAll the previous CA, if still valid, stays in the
// trust bundle after the new one.
func Renew(b *Bundle, d Decision, s Spec, now time.Time) (*Bundle, error) {
	switch d.Action {
	case Keep:
		return b, nil
	case RenewServing:
		cert, key, err := IssueServing(s, b.CACert, b.CAKey, now)
		if err != nil {
			return nil, err
		}
		return &Bundle{CACert: b.CACert, CAKey: b.CAKey, Cert: cert, Key: key}, nil
	case RenewAll:
		nb, err := NewBundle(s, now)
		if err != nil {
			return nil, err
		}
		if b != nil {
			// Only the previous active CA is kept: older ones were already retired once.
			if old, err := pki.DecodeX509CertificateBytes(b.CACert); err == nil && old.IsCA && now.Before(old.NotAfter) {
				if oldPEM, err := pki.EncodeX509(old); err == nil {
					nb.CACert = append(nb.CACert, oldPEM...)
				}
			}
		}
		return nb, nil
	}
	return nil, fmt.Errorf("certs: unknown action %v", d.Action)
}

// checkPair decodes the first certificate of certPEM and keyPEM and returns the certificate, or a
// reason why it cannot be used at time now.
func checkPair(certPEM, keyPEM []byte, now time.Time) (*x509.Certificate, string) {
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, "is missing"
	}
	cert, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		return nil, "cannot be decoded"
	}
	key, err := pki.DecodePrivateKeyBytes(keyPEM)
	if err != nil {
		return nil, "key cannot be decoded"
	}
	if ok, err := pki.PublicKeyMatchesCertificate(key.Public(), cert); err != nil || !ok {
		return nil, "key does not match"
	}
	if now.Before(cert.NotBefore) {
		return nil, "is not valid yet"
	}
	return cert, ""
}

// renewalTime is 2/3 through the certificate's lifetime.
func renewalTime(c *x509.Certificate) time.Time {
	t, err := pki.RenewalTime(c.NotBefore, c.NotAfter, nil, nil, nil)
	if err != nil || t == nil {
		return c.NotAfter
	}
	return t.Time
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func sameIPs(a, b []net.IP) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(ip net.IP) bool { return !slices.ContainsFunc(b, ip.Equal) })
}
