package main

import (
	"flag"
	"fmt"
	"testing"

	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/webhook"
	"github.com/olmguard/olmguard/test/clitest"
	"github.com/olmguard/olmguard/test/docs"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestMain(m *testing.M) { clitest.Main(m, main) }

func TestHelpDocumentsEveryFlag(t *testing.T) {
	o, h := webhook.DefaultOptions(), setup.DefaultWebhook()
	clitest.Help(t, run, func(fs *flag.FlagSet) { o.BindFlags(fs); h.BindFlags(fs) },
		"--port int\n", "(default 9443)", "(default :8081)", "(default :8080)", "(default olmguard-system)",
		"(default olmguard-webhook)", "(default info)", "--self-signed\n", "--policy-mixed-approval", "(default warn)", "--policy-catalog-trust", "(default olm)",
		"--unpack-job-ttl duration\n", "--cleanup-finalizer-users")
}

func TestBadFlagsExitWithOneLine(t *testing.T) {
	clitest.BadFlags(t, run, name, []clitest.BadFlag{
		{Args: []string{"--port=abc"}, Want: `invalid value "abc" for flag --port`},
		{Args: []string{"--self-signed", "--port=0"}, Want: "--port 0 is out of range"},
		{Args: nil, Want: "one of --cert-dir or --self-signed is required"},
		{Args: []string{"--self-signed", "--register-url=http://127.0.0.1:9443"}, Want: "--register-url"},
		{Args: []string{"--self-signed", "--metrics-bind-address=8080"}, Want: "--metrics-bind-address"},
		{Args: []string{"--self-signed", "--namespace=Not_OK"}, Want: "--namespace"},
		{Args: []string{"--self-signed", "--self-signed-cert-duration=1ms"}, Want: "--self-signed-cert-duration"},
		{Args: []string{"--self-signed", "--extra-sans=bad name"}, Want: "--extra-sans"},
		{Args: []string{"--unknown"}, Want: "flag provided but not defined: --unknown"},
		{Args: []string{"--self-signed", "extra"}, Want: `unexpected argument "extra"`},
		{Args: []string{"--policy-mixed-approval=deny"}, Want: "--policy-mixed-approval"},
		{Args: []string{"--cleanup-finalizer-users=,"}, Want: "--cleanup-finalizer-users"},
		{Args: []string{"--trusted-catalog-registries=https://registry.example.com"}, Want: "--trusted-catalog-registries"},
		{Args: []string{"--trusted-catalog-namespaces=Not_OK"}, Want: "--trusted-catalog-namespaces"},
	})
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	clitest.SIGTERMStopsCleanly(t, func(kubeconfig string, health int) []string {
		return []string{"--kubeconfig=" + kubeconfig, "--self-signed", "--namespace=olmguard-sigterm",
			fmt.Sprintf("--port=%d", testenv.FreePort(t)), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health),
			"--metrics-bind-address=0"}
	})
}

func TestVersion(t *testing.T) { clitest.Version(t, run, name, "--version") }

// README.md documents every flag of the webhook, and no flag it does not have.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	docs.CheckFlagsDocumented(t, run, "../../README.md", "### Webhook (`cmd/webhook`)", "webhook")
}
