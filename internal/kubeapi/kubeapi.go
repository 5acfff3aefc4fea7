// Package kubeapi holds olmguard's client-side limits towards the kube-apiserver. client-go's
// defaults (5 requests per second, burst 10) would throttle the webhook's Subscription lookup
// under load and a cleanup of a thousand operands; the apiserver's priority and fairness still
// protects it from olmguard.
package kubeapi

import "k8s.io/client-go/rest"

// Default client-side limits (the binaries' --kube-api-qps and --kube-api-burst).
const (
	DefaultQPS   = 100
	DefaultBurst = 200
)

// WithLimits returns cfg, copied with the default limits when it sets none.
func WithLimits(cfg *rest.Config) *rest.Config {
	if cfg == nil || cfg.QPS != 0 || cfg.RateLimiter != nil {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	return cfg
}
