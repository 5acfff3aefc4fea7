// Command controller is olmguard's repair and cleanup controller. See DESIGN.md and
// `controller --help`.
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
	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/setup"
)

const name = "olmguard-controller"

// memory is the Go memory limit main chose, logged once logging is set up.
var memory memlimit.Choice

func main() {
	// An explicit GOGC still wins (controller.GCPercent says why 25).
	memlimit.DefaultGCPercent(controller.GCPercent)
	// Without GOMEMLIMIT, 90% of the container's cgroup memory limit; an explicit one wins.
	memory = memlimit.Apply()
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit status: 0 on success or --help, 2 on a bad flag, 1 on a runtime failure.
func run(args []string, stdout, stderr io.Writer) int {
	opts, reconcilers := controller.DefaultOptions(), setup.DefaultController()
	return cli.Command{
		Name:  name,
		About: "controller of olmguard: repairs, cleans up and recovers what OLM leaves behind",
		Bind: func(fs *flag.FlagSet) {
			opts.BindFlags(fs)
			reconcilers.BindFlags(fs)
		},
		Validate: func() error { return setup.ValidateController(opts, reconcilers) },
		Run: func(ctx context.Context, cfg *rest.Config) error {
			memory.Log(ctrl.Log.WithName("memlimit"))
			return controller.Run(ctx, cfg, opts, reconcilers.Reconcilers()...)
		},
	}.Main(args, stdout, stderr)
}
