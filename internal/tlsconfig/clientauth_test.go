package tlsconfig_test

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olmguard/olmguard/internal/tlsconfig"
	"github.com/olmguard/olmguard/internal/tlsconfig/tlstest"
)

// TestVerifyClient: a client is accepted only with a client-authentication certificate that
// chains to the CA, is valid now, and carries an allowed CommonName (any with an empty list).
func TestVerifyClient(t *testing.T) {
	ca, other := tlstest.NewCA(t, "client-ca"), tlstest.NewCA(t, "other-ca")
	apiserver := ca.Issue(t, "kube-apiserver", time.Time{})
	mallory := ca.Issue(t, "mallory", time.Time{})
	forged := other.Issue(t, "kube-apiserver", time.Time{})
	expired := ca.Issue(t, "kube-apiserver", time.Now().Add(-time.Minute))
	serving := ca.Issue(t, "kube-apiserver", time.Time{}, x509.ExtKeyUsageServerAuth)
	def := []string{tlsconfig.DefaultClientCommonName}
	for _, tc := range []struct {
		name    string
		peer    []*x509.Certificate
		roots   *x509.CertPool
		allowed []string
		wantErr string
	}{
		{name: "the apiserver's certificate", peer: []*x509.Certificate{apiserver.Cert}, roots: ca.Pool(), allowed: def},
		{name: "one of several names", peer: []*x509.Certificate{mallory.Cert}, roots: ca.Pool(), allowed: []string{"kube-apiserver", "mallory"}},
		{name: "any name when none are listed", peer: []*x509.Certificate{mallory.Cert}, roots: ca.Pool(), allowed: nil},
		{name: "no certificate", roots: ca.Pool(), allowed: def, wantErr: "no client certificate"},
		{name: "no CA", peer: []*x509.Certificate{apiserver.Cert}, allowed: def, wantErr: "no client CA"},
		{name: "another CommonName", peer: []*x509.Certificate{mallory.Cert}, roots: ca.Pool(), allowed: def, wantErr: `"mallory" is not allowed`},
		{name: "a CommonName differing in case", peer: []*x509.Certificate{ca.Issue(t, "Kube-Apiserver", time.Time{}).Cert}, roots: ca.Pool(), allowed: def, wantErr: "not allowed"},
		{name: "another CA, the right name", peer: []*x509.Certificate{forged.Cert}, roots: ca.Pool(), allowed: def, wantErr: "not accepted"},
		{name: "another CA with the CA claimed as intermediate", peer: []*x509.Certificate{forged.Cert, ca.Cert}, roots: ca.Pool(), allowed: def, wantErr: "not accepted"},
		{name: "expired", peer: []*x509.Certificate{expired.Cert}, roots: ca.Pool(), allowed: def, wantErr: "not accepted"},
		{name: "a serving certificate", peer: []*x509.Certificate{serving.Cert}, roots: ca.Pool(), allowed: def, wantErr: "not accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cn, err := tlsconfig.VerifyClient(tc.peer, tc.roots, tc.allowed, time.Now())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.wantErr == "" && cn != tc.peer[0].Subject.CommonName:
				t.Errorf("CommonName %q", cn)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestClientCAsReload: the pool follows the file; a file that breaks keeps the last good pool
// and reports it once.
func TestClientCAsReload(t *testing.T) {
	a, b := tlstest.NewCA(t, "a"), tlstest.NewCA(t, "b")
	path := filepath.Join(t.TempDir(), "ca.crt")
	write := func(data []byte, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		// Explicit times: two writes within the file system's timestamp granularity.
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Now().Add(-time.Hour)
	if _, err := tlsconfig.LoadClientCAs(path); err == nil {
		t.Fatal("a missing file was accepted")
	}
	write([]byte("not a certificate"), base)
	if _, err := tlsconfig.LoadClientCAs(path); err == nil {
		t.Fatal("a file without a certificate was accepted")
	}
	write(a.PEM, base.Add(time.Second))
	cas, err := tlsconfig.LoadClientCAs(path)
	if err != nil {
		t.Fatal(err)
	}
	accepts := func(ca *tlstest.CA) bool {
		pool, _ := cas.Pool()
		_, err := tlsconfig.VerifyClient([]*x509.Certificate{ca.Issue(t, "kube-apiserver", time.Time{}).Cert}, pool, nil, time.Now())
		return err == nil
	}
	if !accepts(a) || accepts(b) {
		t.Fatal("the loaded pool is not CA a")
	}
	write(b.PEM, base.Add(2*time.Second))
	if accepts(a) || !accepts(b) {
		t.Fatal("the pool did not follow the file to CA b")
	}
	write([]byte("garbage"), base.Add(3*time.Second))
	if _, err := cas.Pool(); err == nil {
		t.Error("a broken file was not reported")
	}
	if _, err := cas.Pool(); err != nil {
		t.Errorf("the same failure was reported twice: %v", err)
	}
	if !accepts(b) {
		t.Error("a broken file dropped the last good pool")
	}
}
