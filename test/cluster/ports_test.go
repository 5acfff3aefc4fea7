package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Start creates a cluster anew only when a component lost its port to another process: that is
// read from the components' logs, where kwokctl's binary runtime keeps them.
func TestPortTaken(t *testing.T) {
	t.Setenv("OLMGUARD_CACHE", t.TempDir())
	c := &Cluster{Name: "ports", managed: true}
	work := filepath.Join(t.TempDir(), "work")
	config := "kind: KwokctlConfiguration\ncomponents:\n- name: etcd\n  binary: /bin/etcd\n  workDir: " + work +
		"\n- name: kube-apiserver\n  binary: /bin/kube-apiserver\n  workDir: " + work + "\n"
	for path, data := range map[string]string{
		filepath.Join(kwokClusterDir(c.Name), "kwok.yaml"): config,
		filepath.Join(work, "logs", "kube-apiserver.log"):  "serving securely on 127.0.0.1:32747\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if c.portTaken() {
		t.Fatal("no log says a port was taken")
	}
	etcdLog := `{"level":"fatal","msg":"discovery failed","error":"listen tcp 127.0.0.1:32751: bind: address already in use"}` + "\n"
	if err := os.WriteFile(filepath.Join(work, "logs", "etcd.log"), []byte(etcdLog), 0o644); err != nil {
		t.Fatal(err)
	}
	if !c.portTaken() {
		t.Fatal("etcd's log says its port was taken")
	}
}

// A stopped component holds kwokctl's create lock until the last stopped component of the process
// starts again: a create meanwhile waits instead of taking the stopped component's port.
func TestStoppedComponentsHoldTheCreateLock(t *testing.T) {
	t.Setenv("OLMGUARD_CACHE", t.TempDir())
	ctx := context.Background()
	lock := createLockPath()
	free := func() bool {
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		unlock, err := lockFile(tctx, lock)
		if err != nil {
			return false
		}
		unlock()
		return true
	}
	c := &Cluster{Name: "held", managed: true}
	if err := c.holdPorts(ctx, KubeAPIServer); err != nil {
		t.Fatal(err)
	}
	if err := c.holdPorts(ctx, KubeControllerManager); err != nil {
		t.Fatal(err) // a second stopped component must not wait on the process's own lock
	}
	if free() {
		t.Fatal("a create could take the lock while two components are stopped")
	}
	c.releasePorts(KubeAPIServer)
	if free() {
		t.Fatal("a create could take the lock while one component is still stopped")
	}
	c.releasePorts("")
	if !free() {
		t.Fatal("the lock stayed held after every component started again")
	}
}

// A kube-apiserver of another CA on this cluster's port is told apart from one not up yet: the
// first makes Start create the cluster again, the second is waited for.
func TestServedByAnother(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"not listening yet", &url.Error{Op: "Get", URL: "https://127.0.0.1:32740/readyz", Err: syscall.ECONNREFUSED}, false},
		{"another CA", &url.Error{Op: "Get", URL: "https://127.0.0.1:32740/readyz", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, true},
		{"as text", errors.New(`Get "https://127.0.0.1:32740/readyz": tls: failed to verify certificate: x509: certificate signed by unknown authority`), true},
	} {
		if got := servedByAnother(tc.err); got != tc.want {
			t.Errorf("%s: servedByAnother = %v, want %v", tc.name, got, tc.want)
		}
	}
}
