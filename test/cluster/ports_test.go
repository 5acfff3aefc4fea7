package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
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

// A cluster's ports are its own until its delete: a cluster created beside it never gets one, even
// while nothing listens on them (a stopped or starting component), nor a port someone listens on or
// a left-running cluster's saved configuration names.
func TestPortBlocks(t *testing.T) {
	t.Setenv("OLMGUARD_CACHE", t.TempDir())
	ctx := context.Background()
	claim := func(name string) *portBlock {
		t.Helper()
		b, err := claimPorts(ctx, name, false)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := claim("a")
	for p := a.base; p < a.base+portBlockSize; p++ {
		if !portFree(p) {
			t.Skipf("port %d is in use on this machine", p)
		}
	}
	b := claim("b")
	if b.base > a.base-portBlockSize {
		t.Fatalf("cluster b got block %d, overlapping a's %d (nothing listens on a's ports)", b.base, a.base)
	}
	a.release()
	again := claim("c")
	if again.base != a.base {
		t.Fatalf("a released block %d, the next claim got %d", a.base, again.base)
	}
	again.release()

	// Someone listens on a port of the free block: it is skipped.
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(a.base+3)))
	if err != nil {
		t.Fatal(err)
	}
	if d := claim("d"); d.base == a.base {
		t.Fatalf("block %d handed out while port %d is in use", d.base, a.base+3)
	} else {
		d.release()
	}
	_ = l.Close()

	// A cluster left running by a process that ended names a port of it in its saved configuration.
	saved := filepath.Join(kwokClusterDir("left-running"), "kwok.yaml")
	if err := os.MkdirAll(filepath.Dir(saved), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf("options:\n  kubeApiserverPort: %d\ncomponents:\n- args:\n  - --listen-client-urls=http://127.0.0.1:%d\n", a.base+1, a.base+7)
	if err := os.WriteFile(saved, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if named := portsInSavedConfigs(); !named[a.base+1] || !named[a.base+7] {
		t.Fatalf("ports named by %s: %v", conf, named)
	}
	e := claim("e")
	if e.base == a.base {
		t.Fatalf("block %d handed out while a saved configuration names its ports", e.base)
	}

	// Starting a cluster that exists claims the block it recorded.
	e.release()
	restarted, err := claimPorts(ctx, "e", true)
	if err != nil {
		t.Fatal(err)
	}
	if restarted.base != e.base {
		t.Fatalf("cluster e restarted with block %d, recorded %d", restarted.base, e.base)
	}
	if _, err := claimPorts(ctx, "never-created", true); err == nil {
		t.Fatal("a cluster that recorded no block was given one")
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
