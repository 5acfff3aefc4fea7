package metricsauth

import (
	"crypto/tls"

	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/olmguard/olmguard/internal/tlsconfig"
)

// ServerOptions is how both binaries serve /metrics. Secure (the default) serves HTTPS with a
// self-signed certificate and lets through only callers the kube-apiserver authenticates
// (TokenReview) and authorizes for `get` on the non-resource URL /metrics (SubjectAccessReview),
// e.g. Prometheus bound to the olmguard-metrics-reader ClusterRole. TLS 1.2 at least, no HTTP/2.
func ServerOptions(bindAddress string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: bindAddress}
	if secure {
		o.SecureServing = true
		o.FilterProvider = AuthorizedOnly
		o.TLSOpts = []func(*tls.Config){tlsconfig.Harden}
	}
	return o
}
