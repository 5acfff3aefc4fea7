package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
)

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func testSpec() Spec {
	return Spec{
		ServiceName: "olmguard-webhook", Namespace: "olmguard-system",
		ExtraDNSNames: []string{"localhost"}, ExtraIPs: []net.IP{net.ParseIP("127.0.0.1")},
		CADuration: 300 * time.Hour, CertDuration: 30 * time.Hour,
	}
}

func mustBundle(t *testing.T, s Spec, now time.Time) *Bundle {
	t.Helper()
	b, err := NewBundle(s, now)
	if err != nil {
		t.Fatalf("NewBundle: %v", err)
	}
	return b
}

func mustCert(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := pki.DecodeX509CertificateBytes(pemBytes)
	if err != nil {
		t.Fatalf("decoding certificate: %v", err)
	}
	return c
}

func TestNewBundle(t *testing.T) {
	s := testSpec()
	b := mustBundle(t, s, t0)
	ca, leaf := mustCert(t, b.CACert), mustCert(t, b.Cert)

	if !ca.IsCA || ca.KeyUsage&x509.KeyUsageCertSign == 0 {
		t.Errorf("CA: IsCA=%v KeyUsage=%v, want a CA that signs certificates", ca.IsCA, ca.KeyUsage)
	}
	if leaf.IsCA || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) {
		t.Errorf("serving certificate: IsCA=%v ExtKeyUsage=%v, want a server certificate", leaf.IsCA, leaf.ExtKeyUsage)
	}
	wantDNS := []string{"olmguard-webhook.olmguard-system.svc", "olmguard-webhook.olmguard-system.svc.cluster.local", "localhost"}
	if !slices.Equal(leaf.DNSNames, wantDNS) {
		t.Errorf("DNS SANs = %v, want %v", leaf.DNSNames, wantDNS)
	}
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Errorf("IP SANs = %v, want [127.0.0.1]", leaf.IPAddresses)
	}
	if got := leaf.NotAfter.Sub(t0); got != s.CertDuration {
		t.Errorf("serving certificate lasts %s from now, want %s", got, s.CertDuration)
	}
	if !leaf.NotBefore.Before(t0) {
		t.Errorf("NotBefore %s is not backdated before %s", leaf.NotBefore, t0)
	}

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range append(wantDNS, "127.0.0.1") {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: t0}); err != nil {
			t.Errorf("verifying for %s: %v", name, err)
		}
	}
	if _, err := tls.X509KeyPair(b.Cert, b.Key); err != nil {
		t.Errorf("serving pair does not load: %v", err)
	}
	if _, err := tls.X509KeyPair(b.CACert, b.CAKey); err != nil {
		t.Errorf("CA pair does not load: %v", err)
	}
}

func TestIssueServingNeverOutlivesCA(t *testing.T) {
	s := testSpec()
	s.CADuration, s.CertDuration = time.Hour, 10*time.Hour
	b := mustBundle(t, s, t0)
	if ca, leaf := mustCert(t, b.CACert), mustCert(t, b.Cert); leaf.NotAfter.After(ca.NotAfter) {
		t.Errorf("serving certificate ends %s, after its CA (%s)", leaf.NotAfter, ca.NotAfter)
	}
}

func TestSpecValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*Spec)
		ok     bool
	}{
		"valid":             {func(*Spec) {}, true},
		"no service":        {func(s *Spec) { s.ServiceName = "" }, false},
		"no namespace":      {func(s *Spec) { s.Namespace = "" }, false},
		"zero CA duration":  {func(s *Spec) { s.CADuration = 0 }, false},
		"negative duration": {func(s *Spec) { s.CertDuration = -time.Second }, false},
	} {
		t.Run(name, func(t *testing.T) {
			s := testSpec()
			tc.mutate(&s)
			if err := s.Validate(); (err == nil) != tc.ok {
				t.Errorf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	s := testSpec()
	b := mustBundle(t, s, t0)
	other := mustBundle(t, s, t0)
	caLife, certLife := s.CADuration, s.CertDuration

	with := func(f func(*Bundle)) *Bundle {
		c := *b
		f(&c)
		return &c
	}
	for name, tc := range map[string]struct {
		bundle *Bundle
		spec   func(*Spec)
		now    time.Time
		want   Action
	}{
		"no bundle":                       {bundle: nil, now: t0, want: RenewAll},
		"fresh":                           {bundle: b, now: t0, want: Keep},
		"serving cert half way":           {bundle: b, now: t0.Add(certLife / 2), want: Keep},
		"serving cert less than 1/3 left": {bundle: b, now: t0.Add(certLife * 7 / 10), want: RenewServing},
		"serving cert expired":            {bundle: b, now: t0.Add(certLife * 2), want: RenewServing},
		"CA less than 1/3 left":           {bundle: b, now: t0.Add(caLife * 7 / 10), want: RenewAll},
		"CA expired":                      {bundle: b, now: t0.Add(caLife * 2), want: RenewAll},
		"clock moved back":                {bundle: b, now: t0.Add(-time.Hour), want: RenewAll},
		"DNS name added":                  {bundle: b, spec: func(s *Spec) { s.ExtraDNSNames = append(s.ExtraDNSNames, "x.example") }, now: t0, want: RenewServing},
		"IP added":                        {bundle: b, spec: func(s *Spec) { s.ExtraIPs = append(s.ExtraIPs, net.ParseIP("::1")) }, now: t0, want: RenewServing},
		"service renamed":                 {bundle: b, spec: func(s *Spec) { s.ServiceName = "other" }, now: t0, want: RenewServing},
		"same SANs in another order":      {bundle: b, spec: func(s *Spec) { s.ExtraDNSNames = []string{"localhost", "olmguard-webhook.olmguard-system.svc"} }, now: t0, want: Keep},
		"serving cert missing":            {bundle: with(func(c *Bundle) { c.Cert = nil }), now: t0, want: RenewServing},
		"serving key does not match":      {bundle: with(func(c *Bundle) { c.Key = other.Key }), now: t0, want: RenewServing},
		"serving cert from another CA":    {bundle: with(func(c *Bundle) { c.Cert, c.Key = other.Cert, other.Key }), now: t0, want: RenewServing},
		"serving cert is garbage":         {bundle: with(func(c *Bundle) { c.Cert = []byte("garbage") }), now: t0, want: RenewServing},
		"CA missing":                      {bundle: with(func(c *Bundle) { c.CACert = nil }), now: t0, want: RenewAll},
		"CA key missing":                  {bundle: with(func(c *Bundle) { c.CAKey = nil }), now: t0, want: RenewAll},
		"CA key does not match":           {bundle: with(func(c *Bundle) { c.CAKey = other.CAKey }), now: t0, want: RenewAll},
		"CA is not a CA":                  {bundle: with(func(c *Bundle) { c.CACert, c.CAKey = b.Cert, b.Key }), now: t0, want: RenewAll},
		"CA key is garbage":               {bundle: with(func(c *Bundle) { c.CAKey = []byte("garbage") }), now: t0, want: RenewAll},
		"trust bundle with a retired CA":  {bundle: with(func(c *Bundle) { c.CACert = append(slices.Clone(b.CACert), other.CACert...) }), now: t0, want: Keep},
		"empty bundle (Secret w/o keys)":  {bundle: &Bundle{}, now: t0, want: RenewAll},
	} {
		t.Run(name, func(t *testing.T) {
			spec := testSpec()
			if tc.spec != nil {
				tc.spec(&spec)
			}
			d := Decide(tc.bundle, spec, tc.now)
			if d.Action != tc.want {
				t.Errorf("Decide() = %v (%s), want %v", d.Action, d.Reason, tc.want)
			}
			if d.Reason == "" {
				t.Error("Decide() gave no reason")
			}
			if d.Action == Keep && !d.RenewAt.After(tc.now) {
				t.Errorf("Keep with RenewAt %s, not after now %s", d.RenewAt, tc.now)
			}
		})
	}
}

// A serving certificate issued when its CA had less life left than the certificate duration ends
// with the CA: it is renewed with the CA, never on its own (it would end at the same time).
func TestDecideServingCutByCA(t *testing.T) {
	s := testSpec()
	s.CADuration, s.CertDuration = 2*time.Minute, 90*24*time.Hour
	b := mustBundle(t, s, t0)
	ca := mustCert(t, b.CACert)
	caRenew := ca.NotAfter.Add(-ca.NotAfter.Sub(ca.NotBefore) / 3)
	for _, now := range []time.Time{t0, t0.Add(30 * time.Second), caRenew.Add(-time.Second)} {
		issued := now
		cert, key, err := IssueServing(s, b.CACert, b.CAKey, issued)
		if err != nil {
			t.Fatal(err)
		}
		nb := &Bundle{CACert: b.CACert, CAKey: b.CAKey, Cert: cert, Key: key}
		d := Decide(nb, s, now)
		if d.Action != Keep || !d.RenewAt.Equal(caRenew) {
			t.Errorf("issued at +%s: Decide() = %v (%s) renewing at %s, want Keep until the CA's renewal at %s",
				issued.Sub(t0), d.Action, d.Reason, d.RenewAt, caRenew)
		}
		if d := Decide(nb, s, caRenew); d.Action != RenewAll {
			t.Errorf("issued at +%s: at the CA's renewal Decide() = %v, want RenewAll", issued.Sub(t0), d.Action)
		}
	}
}

func TestDecideRenewAt(t *testing.T) {
	s := testSpec()
	b := mustBundle(t, s, t0)
	leaf := mustCert(t, b.Cert)
	d := Decide(b, s, t0)
	want := leaf.NotAfter.Add(-leaf.NotAfter.Sub(leaf.NotBefore) / 3)
	if diff := d.RenewAt.Sub(want); diff < -time.Second || diff > time.Second {
		t.Errorf("RenewAt = %s, want about %s (2/3 of the serving certificate's lifetime)", d.RenewAt, want)
	}
}

func TestRenew(t *testing.T) {
	s := testSpec()
	b := mustBundle(t, s, t0)

	t.Run("serving only keeps the CA", func(t *testing.T) {
		now := t0.Add(s.CertDuration * 7 / 10)
		nb, err := Renew(b, Decide(b, s, now), s, now)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(nb.CACert, b.CACert) || !bytes.Equal(nb.CAKey, b.CAKey) {
			t.Error("the CA changed")
		}
		if bytes.Equal(nb.Cert, b.Cert) {
			t.Error("the serving certificate did not change")
		}
		if d := Decide(nb, s, now); d.Action != Keep {
			t.Errorf("renewed bundle: Decide() = %v (%s), want Keep", d.Action, d.Reason)
		}
	})

	t.Run("CA rollover keeps the old CA trusted", func(t *testing.T) {
		now := t0.Add(s.CADuration * 7 / 10)
		nb, err := Renew(b, Decide(b, s, now), s, now)
		if err != nil {
			t.Fatal(err)
		}
		cas, err := pki.DecodeX509CertificateSetBytes(nb.CACert)
		if err != nil {
			t.Fatal(err)
		}
		if len(cas) != 2 || !cas[1].Equal(mustCert(t, b.CACert)) {
			t.Fatalf("trust bundle has %d certificates, want the new CA then the old one", len(cas))
		}
		if d := Decide(nb, s, now); d.Action != Keep {
			t.Errorf("renewed bundle: Decide() = %v (%s), want Keep", d.Action, d.Reason)
		}
		// The next rollover retires the oldest CA.
		later := now.Add(s.CADuration * 7 / 10)
		nb2, err := Renew(nb, Decide(nb, s, later), s, later)
		if err != nil {
			t.Fatal(err)
		}
		if cas2, _ := pki.DecodeX509CertificateSetBytes(nb2.CACert); len(cas2) != 2 || !cas2[1].Equal(cas[0]) {
			t.Errorf("second rollover: want the newest CA then the previous one, got %d certificates", len(cas2))
		}
	})

	t.Run("expired CA is dropped", func(t *testing.T) {
		now := t0.Add(s.CADuration * 2)
		nb, err := Renew(b, Decide(b, s, now), s, now)
		if err != nil {
			t.Fatal(err)
		}
		if cas, _ := pki.DecodeX509CertificateSetBytes(nb.CACert); len(cas) != 1 {
			t.Errorf("trust bundle has %d certificates, want only the new CA", len(cas))
		}
	})

	t.Run("keep", func(t *testing.T) {
		nb, err := Renew(b, Decision{Action: Keep}, s, t0)
		if err != nil || nb != b {
			t.Errorf("Renew(Keep) = %p, %v; want the same bundle", nb, err)
		}
	})
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	b := mustBundle(t, testSpec(), t0)
	if err := WriteFiles(dir, b); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]byte{CertFile: b.Cert, KeyFile: b.Key, CACertFile: b.CACert} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: content differs (err %v)", name, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, KeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v (err %v), want 0600", fi.Mode().Perm(), err)
	}

	// Unchanged content is not rewritten (the file keeps its inode).
	before, _ := os.Stat(filepath.Join(dir, CertFile))
	if err := WriteFiles(dir, b); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(filepath.Join(dir, CertFile))
	if !os.SameFile(before, after) {
		t.Error("unchanged tls.crt was rewritten")
	}

	ca, err := ReadCABundle(dir)
	if err != nil || !bytes.Equal(ca, b.CACert) {
		t.Errorf("ReadCABundle = %v; want ca.crt", err)
	}
	if ca, err := ReadCABundle(t.TempDir()); ca != nil || err != nil {
		t.Errorf("ReadCABundle(empty dir) = %q, %v; want nil, nil", ca, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 3 {
		t.Errorf("directory holds %d entries, want 3 (no temporary files left)", len(entries))
	}
}
