// Command controller is olmguard's repair and cleanup controller. See DESIGN.md and
// `controller --help`.
package main

import (
	"context"
	"io"
	"os"
	"runtime/debug"

	"k8s.io/client-go/rest"

	"github.com/olmguard/olmguard/internal/cli"
	"github.com/olmguard/olmguard/pkg/controller"
)

const name = "olmguard-controller"

func main() {
	// The controller's heap is mostly its caches; at Go's default GOGC=100 the garbage of decoding
	// large objects (CSVs of hundreds of kilobytes) set its peak memory. GOGC=50 took the peak with
	// 2,000 such CSVs from 90 to 67 MiB (docs/performance.md). An explicit GOGC still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(50)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit status: 0 on success or --help, 2 on a bad flag, 1 on a runtime failure.
func run(args []string, stdout, stderr io.Writer) int {
	opts := controller.DefaultOptions()
	return cli.Command{
		Name:     name,
		About:    "controller of olmguard: repairs, cleans up and recovers what OLM leaves behind",
		Bind:     opts.BindFlags,
		Validate: opts.Validate,
		Run: func(ctx context.Context, cfg *rest.Config) error {
			return controller.Run(ctx, cfg, opts, reconcilers...)
		},
	}.Main(args, stdout, stderr)
}
