package realnode

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/certs"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

// testCertRotationInPods rotates the self-signed certificates while both webhook pods serve and
// admissions flow. The test puts a CA of two minutes into the pods' Secret, trusted beside the
// current one, as a CA rollover by one replica would; from there the pods do the rest on their
// own: each finds its serving certificate not signed by the CA and issues one (within the
// rotator's one-minute recheck), and when two thirds of the short CA's life are gone one of them
// rolls the CA over to a new long-lived one. Every admission must keep olmguard's answer, and no
// pod may present an expired certificate.
func testCertRotationInPods(t *testing.T, c *cluster.Cluster, jobsNS string) {
	const caDuration = 2 * time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), caDuration+2*testenv.Patience)
	defer cancel()
	key := client.ObjectKey{Namespace: olmguard.DefaultNamespace, Name: olmguard.WebhookTLSSecretName}
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	first, err := pki.DecodeX509CertificateBytes(secret.Data[certs.CACertKey])
	if err != nil {
		t.Fatalf("the pods' CA: %v", err)
	}
	spec := certs.DefaultOptions().Spec
	spec.CADuration = caDuration
	shortCA, shortKey, err := certs.IssueCA(spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	short, err := pki.DecodeX509CertificateBytes(shortCA)
	if err != nil {
		t.Fatal(err)
	}
	firstPEM, err := pki.EncodeX509(first)
	if err != nil {
		t.Fatal(err)
	}

	l := startLoad(newAdmissions(t, c, "realnode-rotation", jobsNS, false), 3)
	obs := &servedCerts{seen: map[string]*x509.Certificate{}}
	stopObserving := obs.observe(ctx, c)
	secret.Data[certs.CACertKey] = append(append([]byte{}, shortCA...), firstPEM...)
	secret.Data[certs.CAKeyKey] = shortKey
	if err := c.Client.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	// Done when every pod serves a certificate of a CA the pods issued themselves after the short
	// one, and traffic has flowed for a few seconds more.
	var rolledAt time.Time
	err = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(context.Context) (bool, error) {
		if rolledAt.IsZero() && obs.allIssuedByOtherThan(first, short) {
			rolledAt = time.Now()
		}
		return !rolledAt.IsZero() && time.Since(rolledAt) > 5*time.Second, nil
	})
	stopObserving()
	l.Stop()
	l.Check(t, "certificate rotation in the webhook pods")
	s := obs.summary(short)
	t.Logf("RESULT self-signed rotation in pods: %d serving certificates seen (%d under the short CA), %d CAs; the pods' own CA served by both %s after the short CA was written; %d expired certificates presented",
		s.leaves, s.underShort, s.cas, rolledAt.Sub(written).Round(time.Second), s.expired)
	if err != nil {
		t.Fatalf("the pods did not roll their certificates over (serving under the short CA: %d certificates): %v", s.underShort, err)
	}
	if s.underShort == 0 {
		t.Error("no pod ever served a certificate of the short CA: its rollover was not exercised")
	}
	// One pod renews and saves, the other reads the Secret: a renewal loop would show many.
	if s.underShort > 2 {
		t.Errorf("%d serving certificates under the short CA: the pods renewed in a loop (want one, two on a conflict)", s.underShort)
	}
	if s.expired > 0 {
		t.Errorf("the webhook pods presented an expired certificate %d times", s.expired)
	}
}

// servedCerts records what the webhook pods present on their serving port.
type servedCerts struct {
	mu      sync.Mutex
	seen    map[string]*x509.Certificate // by serial
	current map[string]*x509.Certificate // by pod
	expired int
}

// observe dials every running webhook pod every 200 ms until the returned function is called.
func (o *servedCerts) observe(ctx context.Context, c *cluster.Cluster) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pods := &corev1.PodList{}
			if err := c.Client.List(ctx, pods, client.InNamespace(olmguard.DefaultNamespace),
				client.MatchingLabels{"app.kubernetes.io/name": "olmguard", "app.kubernetes.io/component": "webhook"}); err != nil {
				return false, nil
			}
			current := map[string]*x509.Certificate{}
			for _, p := range pods.Items {
				if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
					continue
				}
				at := time.Now() // before the handshake: a certificate counted expired was presented expired
				leaf, err := servedLeaf(ctx, net.JoinHostPort(p.Status.PodIP, "9443"))
				if err != nil {
					continue
				}
				current[p.Name] = leaf
				o.mu.Lock()
				o.seen[leaf.SerialNumber.String()] = leaf
				if at.After(leaf.NotAfter) {
					o.expired++
				}
				o.mu.Unlock()
			}
			o.mu.Lock()
			o.current = current
			o.mu.Unlock()
			return false, nil
		})
	}()
	return func() { cancel(); <-done }
}

// allIssuedByOtherThan reports whether every pod last presented a certificate signed by none of
// the given CAs.
func (o *servedCerts) allIssuedByOtherThan(cas ...*x509.Certificate) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.current) == 0 {
		return false
	}
	for _, leaf := range o.current {
		for _, ca := range cas {
			if leaf.CheckSignatureFrom(ca) == nil {
				return false
			}
		}
	}
	return true
}

type certSummary struct{ leaves, underShort, cas, expired int }

func (o *servedCerts) summary(short *x509.Certificate) certSummary {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := certSummary{leaves: len(o.seen), expired: o.expired}
	var issuers [][]byte
	for _, leaf := range o.seen {
		if leaf.CheckSignatureFrom(short) == nil {
			s.underShort++
		}
		if !containsBytes(issuers, leaf.AuthorityKeyId) {
			issuers = append(issuers, leaf.AuthorityKeyId)
		}
	}
	s.cas = len(issuers)
	return s
}

func containsBytes(list [][]byte, b []byte) bool {
	for _, x := range list {
		if bytes.Equal(x, b) {
			return true
		}
	}
	return false
}

// servedLeaf returns the certificate the server at addr presents.
func servedLeaf(ctx context.Context, addr string) (*x509.Certificate, error) {
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}} //nolint:gosec // only the presented certificate is read
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}
