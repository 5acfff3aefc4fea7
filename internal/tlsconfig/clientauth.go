package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"
)

// DefaultClientCommonName is the CommonName a client certificate must carry when a client CA is
// set and no names are given: the name the kube-apiserver's webhook client certificate usually has.
const DefaultClientCommonName = "kube-apiserver"

// RequestClientCert asks every TLS client for a certificate without judging it in the handshake:
// VerifyClient judges it per request, so that a refused caller gets an HTTP 403 (and is counted)
// instead of a handshake failure, and so that the CA file can change without a restart. crypto/tls
// still checks that a client sending a certificate holds its private key (CertificateVerify).
func RequestClientCert(c *tls.Config) {
	c.ClientAuth = tls.RequestClientCert
}

// VerifyClient reports whether a TLS peer's certificates (leaf first, as
// tls.ConnectionState.PeerCertificates) chain to roots for client authentication at now, and
// whether the leaf's CommonName is one of allowed (empty allowed: any CommonName). It returns the
// leaf's CommonName when the client is accepted.
func VerifyClient(peer []*x509.Certificate, roots *x509.CertPool, allowed []string, now time.Time) (string, error) {
	if len(peer) == 0 {
		return "", errors.New("no client certificate")
	}
	if roots == nil {
		return "", errors.New("no client CA")
	}
	inter := x509.NewCertPool()
	for _, c := range peer[1:] {
		inter.AddCert(c)
	}
	leaf := peer[0]
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return "", fmt.Errorf("client certificate not accepted: %w", err)
	}
	cn := leaf.Subject.CommonName
	if len(allowed) > 0 && !slices.Contains(allowed, cn) {
		return "", fmt.Errorf("client certificate CommonName %q is not allowed", cn)
	}
	return cn, nil
}

// ClientCAs is a PEM CA bundle read from a file and read again when the file changes (a mounted
// ConfigMap or Secret is replaced in place by the kubelet).
type ClientCAs struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	pem     []byte
	pool    *x509.CertPool
	failing string // the last reload error, reported once
}

// LoadClientCAs reads path, which must hold at least one PEM certificate.
func LoadClientCAs(path string) (*ClientCAs, error) {
	c := &ClientCAs{path: path}
	if _, err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// Pool returns the current CA pool, reading the file again when its size or modification time
// changed. A file that turned unreadable or holds no certificate keeps the last good pool; the
// error says why, once per failure (the caller logs it).
func (c *ClientCAs) Pool() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fi, err := os.Stat(c.path)
	if err == nil && fi.ModTime().Equal(c.modTime) && fi.Size() == c.size {
		return c.pool, nil
	}
	pool, err := c.reloadLocked()
	if err == nil {
		c.failing = ""
		return pool, nil
	}
	if err.Error() == c.failing {
		return pool, nil
	}
	c.failing = err.Error()
	return pool, fmt.Errorf("%w (the last CA read is kept)", err)
}

func (c *ClientCAs) reload() (*x509.CertPool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reloadLocked()
}

func (c *ClientCAs) reloadLocked() (*x509.CertPool, error) {
	fi, err := os.Stat(c.path)
	if err != nil {
		return c.pool, fmt.Errorf("client CA file %s: %w", c.path, err)
	}
	b, err := os.ReadFile(c.path)
	if err != nil {
		return c.pool, fmt.Errorf("client CA file %s: %w", c.path, err)
	}
	if c.pool != nil && bytes.Equal(b, c.pem) {
		c.modTime, c.size = fi.ModTime(), fi.Size()
		return c.pool, nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return c.pool, fmt.Errorf("client CA file %s holds no PEM certificate", c.path)
	}
	c.modTime, c.size, c.pem, c.pool = fi.ModTime(), fi.Size(), b, pool
	return pool, nil
}
