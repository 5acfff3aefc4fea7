// Package hostile is olmguard's hostile-tenant tier (issue 31): a kwok cluster running OLM
// v0.46.0's own operators, olmguard installed as the README says (the manifests' RBAC and webhook
// configurations, both binaries as their ServiceAccounts, default flags), and tenants that hold only
// what the built-in ClusterRole `edit` grants in their own namespace, with OLM's aggregated roles
// as OLM's chart ships them. Each attack of issue 31 runs as such a tenant; after each, nothing
// outside the tenants' namespaces was deleted or changed (a snapshot of every other object), the
// webhook still serves, no response carried another namespace's data, and doctor's output holds
// no control character and only commands that parse as one kubectl invocation each.
package hostile

import (
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
)

func TestMain(m *testing.M) {
	logf.SetLogger(logr.Discard())
	if err := realolm.UseOLMCRDs(); err != nil {
		fmt.Fprintf(os.Stderr, "[hostile] %v\n", err)
		os.Exit(1)
	}
	opts := cluster.Options{Name: fmt.Sprintf("olmguard-hostile-%d", os.Getpid())}
	if os.Getenv(clientAuthEnv) == "1" {
		dir, err := os.MkdirTemp("", "olmguard-hostile-auth-")
		if err == nil {
			var config string
			if config, err = setUpClientAuth(dir); err == nil {
				opts.APIServerArgs = map[string]string{"admission-control-config-file": config}
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "[hostile] client authentication: %v\n", err)
			os.Exit(1)
		}
	}
	cluster.Main(m, opts)
}
