// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with OLM's
// CRDs installed, for integration tests. There is no kube-controller-manager: no garbage
// collector and no Job controller; use test/cluster for those.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/olmguard/olmguard/pkg/olm/crds"
	olmscheme "github.com/olmguard/olmguard/pkg/olm/scheme"
	"github.com/olmguard/olmguard/test/testbin"
)

// EnvOLMCRDs, when set to a directory, makes the environments install the CRDs found there (OLM's
// published ones) instead of olmguard's own.
const EnvOLMCRDs = "OLMGUARD_OLM_CRDS"

// Env is a running control plane.
type Env struct {
	Config *rest.Config
	Client client.Client
	Scheme *runtime.Scheme
	stop   func() error
}

// Scheme returns the binaries' scheme (pkg/olm/scheme): the built-in kinds, CRDs and OLM's
// typed views.
func Scheme() *runtime.Scheme {
	s, err := olmscheme.New()
	if err != nil {
		panic(err)
	}
	return s
}

// CRDs returns the CRDs a test control plane should serve: OLM's own from OLMGUARD_OLM_CRDS when
// set, olmguard's otherwise.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	if dir := os.Getenv(EnvOLMCRDs); dir != "" {
		return crds.LoadDir(dir)
	}
	return crds.Load()
}

// Start starts a control plane for one test (or one TestMain) and stops it at cleanup.
func Start(tb testing.TB) *Env {
	tb.Helper()
	e, err := StartWith(testbin.Require(tb, "kube-apiserver", "etcd"), nil)
	if err != nil {
		tb.Fatalf("starting envtest: %v", err)
	}
	tb.Cleanup(func() { _ = e.Stop() })
	return e
}

// StartTimeout and StopTimeout bound starting or stopping a control plane process and waiting for
// what a start brings (the default namespace, the CRDs served): Patience, since a slow, busy
// machine takes its time and only a hang should fail.
const (
	StartTimeout = Patience
	StopTimeout  = Patience
)

// StartWith starts a control plane from binaries in dir with the given CRDs (nil: CRDs()).
//
// It does what envtest.Environment.Start does, with StartTimeout for every wait: the Environment
// gives each process 20 s to start, the default namespace 5 s to appear (not configurable) and the
// CRDs 10 s to be served, which a busy machine can exceed.
func StartWith(dir string, defs []*apiextensionsv1.CustomResourceDefinition) (*Env, error) {
	return StartConfigured(dir, defs, nil)
}

// StartConfigured is StartWith with configure (when not nil) called on the kube-apiserver before
// it starts, e.g. to pass it flags through Configure().
func StartConfigured(dir string, defs []*apiextensionsv1.CustomResourceDefinition, configure func(*envtest.APIServer)) (*Env, error) {
	if defs == nil {
		var err error
		if defs, err = CRDs(); err != nil {
			return nil, err
		}
	}
	plane := &envtest.ControlPlane{
		Etcd:      &envtest.Etcd{Path: filepath.Join(dir, "etcd"), StartTimeout: StartTimeout, StopTimeout: StopTimeout},
		APIServer: &envtest.APIServer{Path: filepath.Join(dir, "kube-apiserver"), StartTimeout: StartTimeout, StopTimeout: StopTimeout},
	}
	if configure != nil {
		configure(plane.APIServer)
	}
	// As the Environment does: a start can fail on a port taken in between by another process.
	var err error
	for range 5 {
		if err = plane.Start(); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	e, err := prepare(plane, defs)
	if err != nil {
		return nil, errors.Join(err, plane.Stop())
	}
	return e, nil
}

// prepare connects to a started control plane and installs the CRDs.
func prepare(plane *envtest.ControlPlane, defs []*apiextensionsv1.CustomResourceDefinition) (*Env, error) {
	e, err := connect(plane)
	if err != nil {
		return nil, err
	}
	if _, err := envtest.InstallCRDs(e.Config, crdOptions(defs)); err != nil {
		return nil, fmt.Errorf("installing the CRDs: %w", err)
	}
	return e, nil
}

// connect connects to a started control plane's apiserver as an administrator and waits for the
// default namespace. Stopping the Env stops the plane.
func connect(plane *envtest.ControlPlane) (*Env, error) {
	// Tests create many objects at once: no client-side throttling, as the Environment does.
	admin, err := plane.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, &rest.Config{QPS: 1000, Burst: 2000})
	if err != nil {
		return nil, fmt.Errorf("provisioning the admin user: %w", err)
	}
	cfg := admin.Config()
	s := Scheme()
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	// The apiserver creates it a moment after it reports healthy.
	err = wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, StartTimeout, true, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, types.NamespacedName{Name: corev1.NamespaceDefault}, &corev1.Namespace{}) == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the default namespace never appeared: %w", err)
	}
	return &Env{Config: cfg, Client: c, Scheme: s, stop: plane.Stop}, nil
}

// crdOptions install the CRDs and wait for them to be served up to StartTimeout: discovery of new
// CRDs is slow on a busy machine, and only a hang should fail.
func crdOptions(defs []*apiextensionsv1.CustomResourceDefinition) envtest.CRDInstallOptions {
	return envtest.CRDInstallOptions{CRDs: defs, MaxTime: StartTimeout, PollInterval: 100 * time.Millisecond}
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.stop() }
