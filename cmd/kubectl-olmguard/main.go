// Command kubectl-olmguard is olmguard's kubectl plugin:
//
//	kubectl olmguard uninstall   remove olmguard's webhook configurations, then its finalizers
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/uninstall"
)

const usage = `Usage: kubectl olmguard <command> [--kubeconfig FILE]

Commands:
  uninstall   remove olmguard's webhook configurations, then olmguard.io/cleanup from every CSV,
              so that removing olmguard leaves nothing stuck (OLM's own objects are not touched)
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kubectl-olmguard", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	config.RegisterFlags(fs)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	cmd := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintf(stderr, "kubectl-olmguard %s: %v\n%s", cmd, err, usage)
		return 2
	}
	if cmd != "uninstall" {
		fmt.Fprintf(stderr, "kubectl-olmguard: unknown command %q\n%s", cmd, usage)
		return 2
	}
	cfg, err := config.GetConfig()
	if err != nil {
		fmt.Fprintf(stderr, "kubectl-olmguard: loading kubeconfig: %v\n", err)
		return 1
	}
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = v1alpha1.AddToScheme(s)
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		fmt.Fprintf(stderr, "kubectl-olmguard: %v\n", err)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := uninstall.Run(ctx, c, stdout); err != nil {
		fmt.Fprintf(stderr, "kubectl-olmguard uninstall: %v\n", err)
		return 1
	}
	return 0
}
