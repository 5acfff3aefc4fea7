// Package kubeapi holds how olmguard's programs present themselves to the kube-apiserver: their
// user agent, and their client-side limits. client-go's defaults (5 requests per second, burst 10)
// would throttle the webhook's Subscription lookup under load and a cleanup of a thousand
// operands; the apiserver's priority and fairness still protects it from olmguard.
package kubeapi

import (
	"runtime/debug"

	"k8s.io/client-go/rest"
)

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

// UserAgent is "<name>/<module version>": the apiserver takes the part before the slash as the
// field manager of the program's writes, so they read as olmguard's in managedFields, audit logs
// and conflict messages rather than as client-go's default for the binary's file name.
func UserAgent(name string) string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		v = bi.Main.Version
	}
	return name + "/" + v
}
