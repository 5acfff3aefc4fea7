package main

import (
	"flag"
	"fmt"
	"testing"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/clitest"
	"github.com/olmguard/olmguard/test/docs"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

func TestHelpDocumentsEveryFlag(t *testing.T) {
	o, r := controller.DefaultOptions(), setup.DefaultController()
	clitest.Help(t, run, func(fs *flag.FlagSet) { o.BindFlags(fs); r.BindFlags(fs) },
		"--leader-elect\n", "(default false)", "--leader-election-namespace string\n", "(default olmguard-system)",
		"--catalog-pod-grace duration\n", "(default 30s)", "(default 10m0s)", "(default opt-in)", "(default 10)",
		"(default :8082)", "(default :8083)", "--drift-window duration\n", "--unpack-job-ttl duration\n")
}

func TestBadFlagsExitWithOneLine(t *testing.T) {
	clitest.BadFlags(t, run, name, []clitest.BadFlag{
		{Args: []string{"--operand-cleanup=sometimes"}, Want: `invalid value "sometimes" for flag --operand-cleanup: must be one of opt-in, always, never`},
		{Args: []string{"--catalog-pod-grace=30"}, Want: "--catalog-pod-grace"},
		{Args: []string{"--cleanup-timeout=-1m"}, Want: "--cleanup-timeout -1m0s must be at least 1s"},
		{Args: []string{"--drift-window=0s"}, Want: "--drift-window"},
		{Args: []string{"--unpack-job-ttl=1s"}, Want: "--unpack-job-ttl"},
		{Args: []string{"--catalog-pod-deletions-per-minute=0"}, Want: "--catalog-pod-deletions-per-minute"},
		{Args: []string{"--leader-election-namespace=Nope!"}, Want: "--leader-election-namespace"},
		{Args: []string{"--metrics-bind-address=:notaport"}, Want: "--metrics-bind-address"},
		{Args: []string{"--leader-elect=maybe"}, Want: "--leader-elect"},
		{Args: []string{"extra"}, Want: `unexpected argument "extra"`},
		{Args: []string{"--kube-api-qps=0"}, Want: "--kube-api-qps 0 and --kube-api-burst 200 must be positive"},
	})
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	clitest.SIGTERMStopsCleanly(t, func(kubeconfig string, health int) []string {
		return []string{"--kubeconfig=" + kubeconfig, "--leader-elect", "--leader-election-namespace=olmguard-sigterm",
			fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health), "--metrics-bind-address=0"}
	})
}

func TestVersion(t *testing.T) { clitest.Version(t, run, name, "--version") }

// An unknown --controllers name is a bad flag, checked against the registry before the
// controller starts (fails before the registry: it was found only once the manager was built,
// after the kubeconfig was loaded, and exited 1).
func TestUnknownReconcilerIsABadFlag(t *testing.T) {
	clitest.BadFlags(t, run, name, []clitest.BadFlag{
		{Args: []string{"--controllers=csv-cleanup,nope"}, Want: `--controllers: unknown reconciler "nope" (known: installplan-owners, subscription-drift, csv-cleanup, unpack-jobs, catalog-pods, olm-audit, webhook-probe)`},
		{Args: []string{"--controllers=,"}, Want: "lists no reconciler"},
	})
}

// README.md documents every flag of the controller, and no flag it does not have. Failed when
// written: --metrics-secure had no row in the controller's table.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	docs.CheckFlagsDocumented(t, run, "../../README.md", "### Controller (`cmd/controller`)", "controller")
}
