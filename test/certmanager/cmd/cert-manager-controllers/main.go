// Command cert-manager-controllers runs the parts of cert-manager that olmguard's cert-manager
// overlay relies on: the certificate controllers, the approver, the SelfSigned and CA issuers and
// the CA injector. They are cert-manager's own controllers, taken from its library packages at the
// version pinned in go.mod; cert-manager's command modules (cmd/controller, cmd/cainjector) are
// not served by the module proxy this project builds from, so the tests assemble the controllers
// here instead of running cert-manager's binaries. It is a test tool, not part of olmguard.
//
// It serves /readyz on --health-probe-bind-address once every controller runs and the CA
// injector's caches have synced.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	cmlogs "github.com/cert-manager/cert-manager/pkg/logs"
	cmutil "github.com/cert-manager/cert-manager/pkg/util"

	// Each import registers its controller with controllerpkg.
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Controllers are the cert-manager controllers run, by the names cert-manager registers them
// under: a Certificate's whole life (trigger, key, request, issuing, readiness, revisions), the
// approval of its CertificateRequests, and the SelfSigned and CA issuers.
var Controllers = []string{
	"certificates-trigger",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-issuing",
	"certificates-readiness",
	"certificates-revision-manager",
	"certificaterequests-approver",
	"certificaterequests-issuer-selfsigned",
	"certificaterequests-issuer-ca",
	"issuers",
	"clusterissuers",
}

func main() {
	// An own flag set: controller-runtime registers --kubeconfig on the global one.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	health := fs.String("health-probe-bind-address", ":8081", "address of /readyz and /healthz")
	metrics := fs.String("metrics-bind-address", "0", "address of the CA injector's metrics (0: off)")
	clusterResources := fs.String("cluster-resource-namespace", "cert-manager", "namespace of ClusterIssuers' Secrets")
	klog.InitFlags(fs)
	_ = fs.Parse(os.Args[1:])
	cmlogs.InitLogs()
	crlog.SetLogger(klog.NewKlogr())

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	err := run(ctx, *kubeconfig, *health, *metrics, *clusterResources)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controllers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, health, metrics, clusterResources string) error {
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   50,
		KubernetesAPIBurst: 100,
		IssuerOptions:      controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterResources},
	})
	if err != nil {
		return err
	}
	var (
		wg   sync.WaitGroup
		errs = make(chan error, len(Controllers)+1)
	)
	for _, name := range Controllers {
		construct, ok := controllerpkg.Known()[name]
		if !ok {
			return fmt.Errorf("cert-manager has no controller %q", name)
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.Run(2, ctx); err != nil {
				errs <- fmt.Errorf("controller %s: %w", name, err)
			}
		}()
	}
	// The controllers registered their informers while being built; start them now.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.KubeSharedInformerFactory.Start(ctx.Done())

	injector, err := caInjector(ctx, kubeconfig, health, metrics)
	if err != nil {
		return err
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := injector.Start(ctx); err != nil {
			errs <- fmt.Errorf("CA injector: %w", err)
		}
	}()

	select {
	case err := <-errs:
		return err
	case <-ctx.Done():
	}
	wg.Wait()
	return nil
}

// caInjector is cert-manager's cainjector on a controller-runtime manager: it copies a
// Certificate's CA into the webhook configurations that name it in cert-manager.io/inject-ca-from.
func caInjector(ctx context.Context, kubeconfig, health, metrics string) (manager.Manager, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	// The injector names its field manager after the user agent, as cert-manager's does.
	cfg = cmutil.RestConfigWithUserAgent(cfg, "cainjector")
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, cmscheme.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	mgr, err := manager.New(cfg, manager.Options{
		Scheme:                 scheme,
		HealthProbeBindAddress: health,
		Metrics:                metricsserver.Options{BindAddress: metrics},
		// Secrets are read from the apiserver, not a cache: the injector learns of a new Secret
		// from a metadata-only watch, and a cached read could still miss it and skip the
		// injection for good. cert-manager's injector reads them uncached too.
		Client: client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
	})
	if err != nil {
		return nil, err
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			"mutatingwebhookconfiguration":   true,
			"validatingwebhookconfiguration": true,
			"apiservice":                     false,
			"customresourcedefinition":       false,
		},
	})
	if err != nil {
		return nil, err
	}
	ready := func(*http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches not synced")
		}
		return nil
	}
	if err := mgr.AddReadyzCheck("caches", ready); err != nil {
		return nil, err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
