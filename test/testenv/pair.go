package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/olmguard/olmguard/test/etcdlink"
)

// EnvLogDir, when set to a directory, makes StartPair write each kube-apiserver's log there.
const EnvLogDir = "OLMGUARD_CONTROL_PLANE_LOGS"

// Pair is a highly available control plane in miniature: two kube-apiservers on one etcd, as
// every production control plane runs them. Each apiserver reaches etcd through its own link, so
// a test can hold what one of them hears from etcd and leave its watch cache behind the other's
// writes.
type Pair struct {
	A, B         *Env
	LinkA, LinkB *etcdlink.Link
	stops        []func() error
}

// StartPair starts etcd and two kube-apiservers from the binaries in dir, with the CRDs (nil:
// CRDs()) installed through A and served by both.
func StartPair(dir string, defs []*apiextensionsv1.CustomResourceDefinition) (p *Pair, err error) {
	if defs == nil {
		if defs, err = CRDs(); err != nil {
			return nil, err
		}
	}
	p = &Pair{}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Stop())
		}
	}()
	etcd := &envtest.Etcd{Path: filepath.Join(dir, "etcd"), StartTimeout: StartTimeout, StopTimeout: StopTimeout}
	if err := etcd.Start(); err != nil {
		return p, fmt.Errorf("starting etcd: %w", err)
	}
	p.stops = append(p.stops, etcd.Stop)
	for _, side := range []struct {
		name string
		env  **Env
		link **etcdlink.Link
	}{{"A", &p.A, &p.LinkA}, {"B", &p.B, &p.LinkB}} {
		link, err := etcdlink.Start(etcd.URL.Host)
		if err != nil {
			return p, err
		}
		p.stops = append(p.stops, link.Close)
		path, cleanup, err := ownHostname(filepath.Join(dir, "kube-apiserver"), "kube-apiserver-"+strings.ToLower(side.name))
		if err != nil {
			return p, err
		}
		p.stops = append(p.stops, cleanup)
		api := &envtest.APIServer{Path: path, EtcdURL: link.URL(), StartTimeout: StartTimeout, StopTimeout: StopTimeout}
		if path == filepath.Join(dir, "kube-apiserver") {
			// One identity for both: the peer proxy would send one's requests to the other.
			api.Configure().Append("feature-gates", "UnknownVersionInteroperabilityProxy=false")
		}
		if logs := os.Getenv(EnvLogDir); logs != "" {
			f, err := os.Create(filepath.Join(logs, "kube-apiserver-"+side.name+".log"))
			if err != nil {
				return p, err
			}
			p.stops = append(p.stops, f.Close)
			api.Out, api.Err = f, f
		}
		if err := api.Start(); err != nil {
			return p, fmt.Errorf("starting kube-apiserver %s: %w", side.name, err)
		}
		// Stopped before the links and etcd: stops run last first.
		p.stops = append(p.stops, api.Stop)
		e, err := connect(&envtest.ControlPlane{APIServer: api, Etcd: etcd})
		if err != nil {
			return p, fmt.Errorf("kube-apiserver %s: %w", side.name, err)
		}
		e.stop = func() error { return nil } // the Pair stops its processes
		*side.env = e
		*side.link = link
	}
	opts := crdOptions(defs)
	if _, err := envtest.InstallCRDs(p.A.Config, opts); err != nil {
		return p, fmt.Errorf("installing CRDs through A: %w", err)
	}
	if err := envtest.WaitForCRDs(p.B.Config, defs, opts); err != nil {
		return p, fmt.Errorf("waiting for B to serve the CRDs: %w", err)
	}
	// An apiserver builds a custom resource's storage and watch cache on its first request for it,
	// from etcd: done now, so that a test holding a link finds both apiservers ready to serve.
	for _, e := range []*Env{p.A, p.B} {
		if err := listEach(e.Client, defs); err != nil {
			return p, err
		}
	}
	return p, nil
}

// listEach lists every CRD's objects once, metadata only.
func listEach(c client.Client, defs []*apiextensionsv1.CustomResourceDefinition) error {
	ctx, cancel := context.WithTimeout(context.Background(), StartTimeout)
	defer cancel()
	for _, d := range defs {
		for _, v := range d.Spec.Versions {
			if !v.Served {
				continue
			}
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(schema.GroupVersionKind{Group: d.Spec.Group, Version: v.Name, Kind: d.Spec.Names.ListKind})
			if err := c.List(ctx, list, client.Limit(1)); err != nil {
				return fmt.Errorf("listing %s %s: %w", d.Name, v.Name, err)
			}
		}
	}
	return nil
}

// ownHostname returns a launcher that runs binary under its own hostname, as on a host of its own:
// a kube-apiserver derives its identity (its Lease, its peer-proxy address) from the hostname, and
// two with one identity fight over one Lease and proxy requests to each other. It needs root (a UTS
// namespace); without it, binary itself.
func ownHostname(binary, hostname string) (path string, cleanup func() error, err error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		return binary, func() error { return nil }, nil
	}
	dir, err := os.MkdirTemp("", "olmguard-"+hostname+"-")
	if err != nil {
		return "", nil, err
	}
	cleanup = func() error { return os.RemoveAll(dir) }
	script := fmt.Sprintf("#!/bin/sh\nexec %s --uts /bin/sh -c 'hostname \"$0\" && exec \"$@\"' %s %s \"$@\"\n", unshare, hostname, binary)
	path = filepath.Join(dir, "kube-apiserver")
	return path, cleanup, os.WriteFile(path, []byte(script), 0o755)
}

// Stop stops both apiservers, the links and etcd.
func (p *Pair) Stop() error {
	var errs []error
	for i := len(p.stops) - 1; i >= 0; i-- {
		errs = append(errs, p.stops[i]())
	}
	p.stops = nil
	return errors.Join(errs...)
}
