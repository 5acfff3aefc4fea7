package e2e

// Certificate rotation while admissions flow: the self-signed rotator renewing the serving
// certificate every few seconds and rolling its CA over, and a --cert-dir whose Secret is
// replaced the way the kubelet updates a mounted Secret volume. Every webhook has failurePolicy
// Ignore, so a TLS failure does not fail the request: a failed admission is a request the
// apiserver let through without olmguard's answer. They are counted two ways: every InstallPlan
// created during the test must come back with its namespace's Subscription as owner, and the
// kube-apiserver's own counters of fail-open and non-200 webhook calls must not move.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cert-manager/cert-manager/pkg/util/pki"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/certs"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/load"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// Acceptance: certificate rotation (self-signed mode and a replaced Secret in cert-dir mode)
// while requests flow: zero failed admissions.
func TestCertRotation(t *testing.T) {
	c := cluster.Shared(t)
	t.Run("SelfSigned", func(t *testing.T) { testSelfSignedRotation(t, c) })
	t.Run("CertDir", func(t *testing.T) { testCertDirRotation(t, c) })
}

// Self-signed: serving certificates of 90 s (renewed after ~57 s) under a CA of 2 m (renewed after
// ~76 s), so a minute and a half of traffic crosses a serving-certificate renewal and a CA
// rollover, which renews the serving certificate too. A certificate is renewed when a third of its
// lifetime remains: over 30 s here, so that a slow renewal on a busy machine never lets one expire.
func testSelfSignedRotation(t *testing.T, c *cluster.Cluster) {
	const caDuration, certDuration = 2 * time.Minute, 90 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), caDuration+3*testenv.Patience)
	defer cancel()
	// A fresh CA, so its rollover falls inside the test; at the end the Secret goes again, so the
	// next webhook issues long-lived certificates (cleanups run last-in first-out: this one after
	// the webhook has stopped).
	deleteTLSSecret(t, c)
	t.Cleanup(func() { deleteTLSSecret(t, c) })
	startWebhook(t, c, "--self-signed-ca-duration="+caDuration.String(), "--self-signed-cert-duration="+certDuration.String())
	started := time.Now() // about when the first CA was issued
	addr := registeredAddr(t, ctx, c)

	traffic := startAdmissionLoad(t, ctx, c, "olmguard-certrotation-self")
	before := apiserverWebhookCounts(t, ctx, c)
	obs := observeServedCerts(ctx, addr)
	traffic.run(3)

	// Enough traffic for a serving-certificate renewal and one CA rollover, then 12 s more under
	// the new CA. The CA is renewed ~76 s after it was issued (2/3 of its 132 s lifetime, NotBefore
	// being backdated 12 s), the first serving certificate ~57 s after it was.
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, caDuration+testenv.Patience, false, func(context.Context) (bool, error) {
		s := obs.summary()
		return s.cas >= 2 && s.leaves >= 3 && time.Since(s.lastCAAt) >= 12*time.Second, nil
	})
	traffic.Stop()
	obs.stop()
	after := apiserverWebhookCounts(t, ctx, c)
	s := obs.summary()
	t.Logf("self-signed: %s of traffic, %d serving certificates under %d CAs served (the last CA from %s after the webhook was ready); %d expired certificates seen",
		traffic.Elapsed().Round(time.Millisecond), s.leaves, s.cas, s.lastCAAt.Sub(started).Round(time.Millisecond), s.expired)
	traffic.report(t, before, after)
	if err != nil {
		t.Errorf("rotation not observed in time: %d serving certificates, %d CAs served (want >= 3 and >= 2): %v", s.leaves, s.cas, err)
	}
	if s.expired > 0 {
		t.Errorf("the server presented an expired serving certificate %d times", s.expired)
	}
}

// Cert-dir: the certificate comes from a directory laid out as the kubelet lays out a mounted
// Secret, replaced as cert-manager renews and as a CA rollover with trust distribution proceeds.
func testCertDirRotation(t *testing.T, c *cluster.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*testenv.Patience)
	defer cancel()
	spec := certs.Spec{
		ServiceName: olmguard.WebhookServiceName, Namespace: olmguard.DefaultNamespace,
		ExtraIPs: []net.IP{net.ParseIP("127.0.0.1")}, CADuration: time.Hour, CertDuration: time.Hour,
	}
	first, err := certs.NewBundle(spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	vol := &secretVolume{dir: t.TempDir()}
	vol.write(t, first.CACert, first.Cert, first.Key)

	if err := c.CreateNamespace(ctx, olmguard.DefaultNamespace); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeWebhookConfigurations(t, c) })
	p, err := procs.StartWebhookWithCertDir(olmguardBinaries(t), c.Kubeconfig, vol.dir)
	track(t, p, err)
	addr := registeredAddr(t, ctx, c)
	waitCABundle(t, ctx, c, first.CACert)

	traffic := startAdmissionLoad(t, ctx, c, "olmguard-certrotation-dir")
	before := apiserverWebhookCounts(t, ctx, c)
	obs := observeServedCerts(ctx, addr)
	waitServed(t, ctx, obs, addr, first.Cert, "the first serving certificate")
	traffic.run(3)
	flow := func() { time.Sleep(3 * time.Second) } // traffic under each state
	flow()

	// (a) cert-manager renews the serving certificate with the same CA.
	renewedCert, renewedKey, err := certs.IssueServing(spec, first.CACert, first.CAKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	vol.write(t, first.CACert, renewedCert, renewedKey)
	waitServed(t, ctx, obs, addr, renewedCert, "the renewed serving certificate")
	flow()

	// (b) CA rollover. First trust is distributed: ca.crt holds the old and the new CA while the
	// old CA's certificate is still served; the webhook registers the configurations again.
	newCA, newCAKey, err := certs.IssueCA(spec, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	both := append(bytes.Clone(first.CACert), newCA...)
	vol.write(t, both, renewedCert, renewedKey)
	waitCABundle(t, ctx, c, both)
	// The kube-apiserver reads the configurations through an informer: an issuer that waited for
	// trust to be distributed does not switch before it is there either.
	waitAPIServerApplied(t, ctx, c)
	flow()
	// Then the serving certificate of the new CA.
	rolledCert, rolledKey, err := certs.IssueServing(spec, newCA, newCAKey, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	vol.write(t, both, rolledCert, rolledKey)
	waitServed(t, ctx, obs, addr, rolledCert, "the serving certificate of the new CA")
	flow()
	// Finally the old CA is retired from ca.crt.
	vol.write(t, newCA, rolledCert, rolledKey)
	waitCABundle(t, ctx, c, newCA)
	flow()

	traffic.Stop()
	obs.stop()
	after := apiserverWebhookCounts(t, ctx, c)
	s := obs.summary()
	t.Logf("cert-dir: %s of traffic; Secret replaced 4 times (renewed certificate, CA bundle old+new, certificate of the new CA, new CA alone); %d serving certificates under %d CAs served",
		traffic.Elapsed().Round(time.Millisecond), s.leaves, s.cas)
	traffic.report(t, before, after)
	if s.leaves != 3 || s.cas != 2 {
		t.Errorf("%d serving certificates under %d CAs served, want 3 under 2", s.leaves, s.cas)
	}
}

func deleteTLSSecret(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: olmguard.DefaultNamespace, Name: olmguard.WebhookTLSSecretName}}
	if err := c.Client.Delete(context.Background(), s); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
	}
}

// registeredAddr returns host:port of the URL the webhook registered.
func registeredAddr(t *testing.T, ctx context.Context, c *cluster.Cluster) string {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, m); err != nil {
		t.Fatal(err)
	}
	if len(m.Webhooks) == 0 || m.Webhooks[0].ClientConfig.URL == nil {
		t.Fatalf("webhook configuration without a URL: %+v", m.Webhooks)
	}
	u, err := url.Parse(*m.Webhooks[0].ClientConfig.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// waitCABundle waits until every webhook of both configurations carries caBundle.
func waitCABundle(t *testing.T, ctx context.Context, c *cluster.Cluster, caBundle []byte) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, m); err != nil {
			last = err.Error()
			return false, nil
		}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.ValidatingWebhookConfigurationName}, v); err != nil {
			last = err.Error()
			return false, nil
		}
		for _, w := range m.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, caBundle) {
				last = "webhook " + w.Name + " has another CA bundle"
				return false, nil
			}
		}
		for _, w := range v.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, caBundle) {
				last = "webhook " + w.Name + " has another CA bundle"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("configurations never carried the new CA bundle: %v (%s)", err, last)
	}
}

// waitAPIServerApplied waits until the kube-apiserver calls admission webhooks by the mutating
// webhook configurations as they are stored now (the admissions of the load all go through one).
// It registers a probe configuration whose webhook, served by the test, sees dry-run ConfigMaps of
// a namespace of its own, and waits until the kube-apiserver calls it: the kube-apiserver reads
// the configurations through one informer, in order, so by then it has applied every change
// stored before the probe.
func waitAPIServerApplied(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	ns := c.FreshNamespace(ctx, t, "apiserver-probe")
	var called atomic.Bool
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review := &admissionv1.AdmissionReview{}
		if err := json.NewDecoder(r.Body).Decode(review); err != nil || review.Request == nil {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		called.Store(true)
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer srv.Close()
	probe := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: ns},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "probe.e2e.olmguard.io",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL),
				CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"},
					Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if err := c.Client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Client.Delete(context.Background(), probe); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}()
	testenv.Eventually(t, "the kube-apiserver calls a webhook registered after the change", func(ctx context.Context) (bool, error) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns}}
		if err := c.Client.Create(ctx, cm, client.DryRunAll); err != nil {
			return false, err
		}
		return called.Load(), nil
	})
}

// servedLeaf returns the certificate the server at addr presents.
func servedLeaf(ctx context.Context, addr string) (*x509.Certificate, error) {
	d := &tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}} //nolint:gosec // only the presented certificate is read
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.(*tls.Conn).ConnectionState().PeerCertificates[0], nil
}

// waitServed waits until the server at addr presents certPEM, and records it in obs: the
// observer samples, and a sample can come late on a busy machine.
func waitServed(t *testing.T, ctx context.Context, obs *certObserver, addr string, certPEM []byte, what string) {
	t.Helper()
	want, err := pki.DecodeX509CertificateBytes(certPEM)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		at := time.Now()
		got, err := servedLeaf(ctx, addr)
		if err != nil || !bytes.Equal(got.Raw, want.Raw) {
			return false, nil
		}
		obs.record(got, at)
		return true, nil
	})
	if err != nil {
		t.Fatalf("the server never presented %s: %v", what, err)
	}
	t.Logf("cert-dir: %s served %s after the wait for it began", what, time.Since(began).Round(time.Millisecond))
}

// secretVolume lays out a directory as the kubelet keeps a mounted Secret volume: the files live
// in a timestamped directory, ..data is a symlink to it and every key is a symlink to
// ..data/<key>. An update writes a new timestamped directory, points a temporary symlink at it,
// renames that over ..data (the atomic switch), then removes the previous directory.
type secretVolume struct {
	dir     string
	current string
}

func (v *secretVolume) write(t *testing.T, caCert, cert, key []byte) {
	t.Helper()
	files := map[string][]byte{certs.CACertFile: caCert, certs.CertFile: cert, certs.KeyFile: key}
	ts, err := os.MkdirTemp(v.dir, time.Now().UTC().Format("..2006_01_02_15_04_05."))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ts, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(v.dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v.current != "" {
		if err := os.RemoveAll(v.current); err != nil {
			t.Fatal(err)
		}
	}
	v.current = ts
}

// admissionLoad sends dry-run InstallPlans into a namespace holding one Subscription from a few
// workers; each must come back owned by the Subscription, i.e. mutated by olmguard.
type admissionLoad struct {
	*load.Load
	c   *cluster.Cluster
	cl  client.Client // of load.Config: the load sees each admission's warnings
	ns  string
	sub *v1alpha1.Subscription
	ctx context.Context
}

// startAdmissionLoad creates the namespace and the Subscription and waits until the webhook
// answers for it (its cache has the Subscription); run starts the traffic.
func startAdmissionLoad(t *testing.T, ctx context.Context, c *cluster.Cluster, ns string) *admissionLoad {
	t.Helper()
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sub := builders.Subscription(ns, "rotation", "rotation", v1alpha1.ApprovalAutomatic)
	if err := c.Client.Create(ctx, sub); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() { // other tests' controllers see every Subscription
		if err := c.Client.Delete(context.Background(), sub); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sub), sub); err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(load.Config(c.Config), client.Options{Scheme: c.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	l := &admissionLoad{c: c, cl: cl, ns: ns, sub: sub, ctx: ctx}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		return l.admit(ctx)
	})
	if err != nil {
		t.Fatalf("the apiserver never called olmguard's webhook: %v", err)
	}
	return l
}

// admit creates one dry-run plan and reports whether olmguard mutated it.
func (l *admissionLoad) admit(ctx context.Context) (bool, error) {
	ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{GenerateName: "rotation-", Namespace: l.ns},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"rotation"}, Approval: v1alpha1.ApprovalManual}}
	if err := l.cl.Create(ctx, ip, client.DryRunAll); err != nil {
		return false, err
	}
	return scenario.OwnedBy(ip, l.sub.UID), nil
}

// run starts the workers.
func (l *admissionLoad) run(workers int) {
	l.Load = load.Start(l.ctx, func(ctx context.Context, _ int64) (string, bool, error) {
		ok, err := l.admit(ctx)
		return "InstallPlan", ok, err
	}, workers)
}

// report logs the figures and fails the test on any failed admission, counted by the test and by
// the kube-apiserver. A call the kube-apiserver gave up on because olmguard took longer than the
// webhook's timeout to answer is the busy machine, not a rotation: the kube-apiserver's log says
// which calls those were, and they (and as many unanswered admissions) are reported, not failed.
// Any other failed call (a TLS error, a refused connection) fails the test.
func (l *admissionLoad) report(t *testing.T, before, after webhookCounts) {
	t.Helper()
	timeouts, others := apiserverFailOpens(t, l.c, before.logSize)
	l.CheckExcusing(t, "admissions", int64(len(timeouts)), "a kube-apiserver call that timed out")
	failOpen, callErrors, answered := after.failOpen-before.failOpen, after.callErrors-before.callErrors, after.answered-before.answered
	t.Logf("kube-apiserver counters for olmguard's webhooks: fail-open %v -> %v, non-200 calls %v -> %v, 200 answers +%v",
		before.failOpen, after.failOpen, before.callErrors, after.callErrors, answered)
	if len(timeouts) > 0 {
		t.Logf("the kube-apiserver timed out waiting for olmguard %d times on this busy machine: %v", len(timeouts), timeouts)
	}
	if excused := float64(len(timeouts)); failOpen > excused || callErrors > excused || len(others) > 0 {
		var calls []string
		for k, v := range after.byCall {
			if d := v - before.byCall[k]; d != 0 {
				calls = append(calls, fmt.Sprintf("%s: +%v", k, d))
			}
		}
		t.Errorf("the kube-apiserver failed open %v times and had %v failed calls to olmguard's webhooks %v, %d of them timeouts; the others it logged: %v",
			failOpen, callErrors, calls, len(timeouts), others)
	}
	if answered < float64(l.Mutated()) {
		t.Errorf("the kube-apiserver counted %v answers from olmguard, fewer than the %d mutated plans", answered, l.Mutated())
	}
}

// apiserverFailOpens reads the kube-apiserver's log from offset on and returns the calls to
// olmguard's webhooks it failed open on, split into those that ran out of time and the others.
func apiserverFailOpens(t *testing.T, c *cluster.Cluster, offset int64) (timeouts, others []string) {
	t.Helper()
	for _, line := range apiserverLogSince(t, c, offset) {
		if !strings.Contains(line, "failing open") || !ourWebhook(line) {
			continue
		}
		if strings.Contains(line, "context deadline exceeded") || strings.Contains(line, "Client.Timeout exceeded") {
			timeouts = append(timeouts, line)
		} else {
			others = append(others, line)
		}
	}
	return timeouts, others
}

func ourWebhook(line string) bool {
	for _, e := range setup.DefaultWebhook().Admission() {
		if strings.Contains(line, e.Name) {
			return true
		}
	}
	return false
}

// apiserverLogSince returns the kube-apiserver's log lines written from offset on.
func apiserverLogSince(t *testing.T, c *cluster.Cluster, offset int64) []string {
	t.Helper()
	f, err := os.Open(apiserverLogPath(t, c))
	if err != nil {
		t.Fatalf("the kube-apiserver's log: %v", err)
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatalf("the kube-apiserver's log: %v", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("the kube-apiserver's log: %v", err)
	}
	return strings.Split(string(data), "\n")
}

// apiserverLogSize is the kube-apiserver's log's length: where a later read begins.
func apiserverLogSize(t *testing.T, c *cluster.Cluster) int64 {
	t.Helper()
	fi, err := os.Stat(apiserverLogPath(t, c))
	if err != nil {
		t.Fatalf("the kube-apiserver's log: %v", err)
	}
	return fi.Size()
}

func apiserverLogPath(t *testing.T, c *cluster.Cluster) string {
	t.Helper()
	path, err := c.LogPath(cluster.KubeAPIServer)
	if err != nil {
		t.Fatalf("the kube-apiserver's log: %v", err)
	}
	return path
}

// webhookCounts are the kube-apiserver's counters summed over olmguard's webhooks.
type webhookCounts struct {
	failOpen   float64            // apiserver_admission_webhook_fail_open_count
	callErrors float64            // apiserver_admission_webhook_request_total with a code other than 200
	byCall     map[string]float64 // those by webhook, code and rejected, to report
	answered   float64            // apiserver_admission_webhook_request_total with code 200
	logSize    int64              // the kube-apiserver's log's length when they were read
}

func apiserverWebhookCounts(t *testing.T, ctx context.Context, c *cluster.Cluster) webhookCounts {
	t.Helper()
	raw, err := c.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the kube-apiserver's metrics: %v", err)
	}
	ours := map[string]bool{}
	for _, e := range setup.DefaultWebhook().Admission() {
		ours[e.Name] = true
	}
	w := webhookCounts{byCall: map[string]float64{}, logSize: apiserverLogSize(t, c)}
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, labels, value, ok := parseSample(line)
		if !ok || !ours[labels["name"]] {
			continue
		}
		switch name {
		case "apiserver_admission_webhook_fail_open_count":
			w.failOpen += value
		case "apiserver_admission_webhook_request_total":
			if labels["code"] == "200" {
				w.answered += value
			} else {
				w.callErrors += value
				w.byCall[fmt.Sprintf("%s code=%s rejected=%s", labels["name"], labels["code"], labels["rejected"])] += value
			}
		}
	}
	return w
}

// parseSample parses one sample line of the Prometheus text format: name{labels} value [timestamp].
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || strings.HasPrefix(line, "#") {
		return "", nil, 0, false
	}
	open, end := strings.IndexByte(line, '{'), strings.LastIndexByte(line, '}')
	if open < 0 || end < open {
		return "", nil, 0, false
	}
	name, labels = line[:open], map[string]string{}
	rest := line[open+1 : end]
	for rest != "" {
		k, after, found := strings.Cut(rest, `="`)
		if !found {
			return "", nil, 0, false
		}
		var v strings.Builder
		i := 0
		for ; i < len(after) && after[i] != '"'; i++ {
			if after[i] == '\\' && i+1 < len(after) {
				i++
			}
			v.WriteByte(after[i])
		}
		labels[strings.TrimPrefix(k, ",")] = v.String()
		if i >= len(after) {
			break
		}
		rest = after[i+1:]
	}
	fields := strings.Fields(line[end+1:])
	if len(fields) == 0 {
		return "", nil, 0, false
	}
	value, err := strconv.ParseFloat(fields[0], 64)
	return name, labels, value, err == nil
}

// certObserver dials the server every 200 ms and records the serving certificates it presents.
type certObserver struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	leaves   map[string]bool // serial numbers
	cas      map[string]bool // authority key IDs of the served certificates
	firstAt  time.Time
	lastCAAt time.Time // when a certificate of the newest CA was first presented
	expired  int
}

type certSummary struct {
	leaves, cas, expired int
	firstAt, lastCAAt    time.Time
}

func observeServedCerts(ctx context.Context, addr string) *certObserver {
	ctx, cancel := context.WithCancel(ctx)
	o := &certObserver{cancel: cancel, done: make(chan struct{}), leaves: map[string]bool{}, cas: map[string]bool{}}
	go func() {
		defer close(o.done)
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			// Taken before the handshake: a certificate counted as expired was presented expired.
			at := time.Now()
			if leaf, err := servedLeaf(ctx, addr); err == nil {
				o.record(leaf, at)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return o
}

func (o *certObserver) record(leaf *x509.Certificate, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.leaves) == 0 {
		o.firstAt = now
	}
	o.leaves[leaf.SerialNumber.String()] = true
	if ca := hex.EncodeToString(leaf.AuthorityKeyId); !o.cas[ca] {
		o.cas[ca] = true
		o.lastCAAt = now
	}
	if now.After(leaf.NotAfter) {
		o.expired++
	}
}

func (o *certObserver) stop() {
	o.cancel()
	<-o.done
}

func (o *certObserver) summary() certSummary {
	o.mu.Lock()
	defer o.mu.Unlock()
	return certSummary{leaves: len(o.leaves), cas: len(o.cas), expired: o.expired, firstAt: o.firstAt, lastCAAt: o.lastCAAt}
}
