// Package e2e holds olmguard's end-to-end tests. They run against a real local cluster (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler and kwok fake nodes) that test/cluster
// starts once per test binary; a test gets it with cluster.Shared(t). Without the test binaries the
// tests skip (make test builds them and makes their absence a failure).
//
//	OLMGUARD_REQUIRE_BINARIES=1 go test -count=1 ./test/e2e/ -v
//
// OLMGUARD_E2E_KUBECONFIG=<file> runs them against an existing cluster instead (kind, ...);
// OLMGUARD_KEEP_CLUSTER=1 keeps the cluster after the run.
package e2e

import (
	"testing"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/olmguard/olmguard/test/cluster"
)

func TestMain(m *testing.M) {
	// Clients log through controller-runtime; the tests report what matters themselves.
	logf.SetLogger(logr.Discard())
	cluster.Main(m, cluster.Options{})
}
