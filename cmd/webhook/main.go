// Command webhook is olmguard's admission server. See DESIGN.md and `webhook --help`.
package main

import (
	"context"
	"flag"
	"io"
	"os"

	"k8s.io/client-go/rest"

	"github.com/olmguard/olmguard/internal/cli"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/webhook"
)

const name = "olmguard-webhook"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

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
			opts.Endpoints = handlers.Admission()
			return webhook.Run(ctx, cfg, opts)
		},
	}.Main(args, stdout, stderr)
}
