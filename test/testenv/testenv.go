// Package testenv starts a real kube-apiserver and etcd (controller-runtime envtest) with OLM's
// CRDs installed, for integration tests. There is no kube-controller-manager: no garbage
// collector and no Job controller; use test/cluster for those.
package testenv

import (
	"os"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/olmguard/olmguard/pkg/olm/crds"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
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
	env    *envtest.Environment
}

// Scheme returns a scheme with the built-in kinds, CRDs and OLM's typed views.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, v1alpha1.AddToScheme, olmv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
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

// StartWith starts a control plane from binaries in dir with the given CRDs (nil: CRDs()).
func StartWith(dir string, defs []*apiextensionsv1.CustomResourceDefinition) (*Env, error) {
	if defs == nil {
		var err error
		if defs, err = CRDs(); err != nil {
			return nil, err
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
		CRDInstallOptions:     envtest.CRDInstallOptions{CRDs: defs},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	s := Scheme()
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: s, env: env}, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }
