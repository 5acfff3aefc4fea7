// Command webhook is olmguard's admission server. See DESIGN.md and `webhook --help`.
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/olmguard/olmguard/internal/cli"
	"github.com/olmguard/olmguard/internal/memlimit"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/webhook"
)

const name = "olmguard-webhook"

// memory is the Go memory limit main chose, logged once logging is set up.
var memory memlimit.Choice

func main() {
	// Without GOMEMLIMIT, 90% of the container's cgroup memory limit; an explicit one wins.
	memory = memlimit.Apply()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit status: 0 on success or --help, 2 on a bad flag, 1 on a runtime failure.
func run(args []string, stdout, stderr io.Writer) int {
	opts := webhook.DefaultOptions()
	handlers := setup.DefaultWebhook()
	return cli.Command{
		Name:  name,
		About: "admission webhook of olmguard: corrects OLM's writes at admission",
		Bind: func(fs *flag.FlagSet) {
			opts.BindFlags(fs)
			handlers.BindFlags(fs)
		},
		Validate: opts.Validate,
		Run: func(ctx context.Context, cfg *rest.Config) error {
			memory.Log(ctrl.Log.WithName("memlimit"))
			handlers.Namespace = opts.Namespace
			opts.Endpoints = handlers.Admission()
			return webhook.Run(ctx, cfg, opts)
		},
	}.Main(args, stdout, stderr)
}
