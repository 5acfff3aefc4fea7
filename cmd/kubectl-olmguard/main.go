// Command kubectl-olmguard is olmguard's kubectl plugin:
//
//	kubectl olmguard doctor      audit the cluster for the OLM failures olmguard fixes (F1–F5)
//	kubectl olmguard uninstall   scale olmguard to zero, remove its webhook configurations, then its finalizers
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/config"

	"github.com/olmguard/olmguard/internal/kubeapi"
	"github.com/olmguard/olmguard/internal/memlimit"
	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/internal/version"
	"github.com/olmguard/olmguard/pkg/doctor"
	olmscheme "github.com/olmguard/olmguard/pkg/olm/scheme"
	"github.com/olmguard/olmguard/pkg/uninstall"
)

const usage = `Usage: kubectl olmguard <command> [flags]

Commands:
  doctor      audit the cluster for the OLM failures olmguard fixes (F1–F5) and those it
              reports (OLM: orphan CSVs, stuck installs, failed unpacks, OperatorGroups,
              catalogs, packageserver) and print each problem with its evidence and a fix; exit status 0 when healthy, 1 when problems are found,
              2 when the audit could not run or was incomplete
  version     print the version and commit this plugin was built from (also --version)
  uninstall   scale olmguard's Deployments (olmguard-system) to zero and wait for their pods to
              stop, remove its webhook configurations, then olmguard.io/cleanup from every CSV,
              so that removing olmguard leaves nothing stuck (OLM's own objects are not
              touched); then delete olmguard's manifests with kubectl delete --ignore-not-found

Flags of every command:
  --kubeconfig FILE   kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, in-cluster)

Flags of uninstall:
  --stop-timeout D    how long to wait for olmguard's pods to stop (default 2m)

Flags of doctor:
  -n, --namespace NS  audit one namespace (default: all namespaces)
  -o, --output FMT    table (default) or json
  --stuck-after D     how long a CSV or catalog pod may be terminating before it is stuck (default 5m)
  --pending-after D   how long a CSV may stay Pending/Installing, or a catalog not READY, before it
                      is reported (default 10m)
  --recheck D         wait before confirming a Subscription out of step with its plan (default 3s)
  --include-copied-csvs
                      also read CSVs labelled olm.copiedFrom, OLM's copies of an AllNamespaces
                      operator's CSV (left out by default, as OLM's own informers leave them out)
  --copied-csvs-above N
                      report OLM's copies of operators installed for all namespaces when they are
                      more than N, counted from the originals and the namespaces (default 1000;
                      0 leaves the check out)
  --olmguard-namespace NS
                      olmguard's namespace (default olmguard-system): a whole-cluster audit checks
                      that the kube-apiserver calls olmguard's webhook with a dry-run create of a
                      ConfigMap there, which stores nothing but needs create on configmaps in NS
`

func main() {
	// doctor keeps every Subscription and InstallPlan of the cluster while it reads the other
	// kinds page by page: at Go's default pace the pages' garbage doubles its peak (245 MiB on a
	// cluster of 2,000 namespaces, 191 at 50: docs/performance.md). An explicit GOGC still wins.
	memlimit.DefaultGCPercent(50)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run returns the exit status: 0 success, 1 problems found (doctor) or a failed uninstall, 2 usage
// errors and audits that could not run.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		return 0
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(stdout, version.Get().String("kubectl-olmguard"))
		return 0
	}
	cmd := args[0]
	fs := flag.NewFlagSet("kubectl-olmguard "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	config.RegisterFlags(fs)
	do := doctor.DefaultOptions()
	output := "table"
	olmguardNamespace := "olmguard-system"
	stopTimeout := uninstall.DefaultStopTimeout
	switch cmd {
	case "uninstall":
		fs.DurationVar(&stopTimeout, "stop-timeout", stopTimeout, "how long to wait for olmguard's pods to stop")
	case "doctor":
		for _, name := range []string{"n", "namespace"} {
			fs.StringVar(&do.Namespace, name, "", "namespace to audit")
		}
		for _, name := range []string{"o", "output"} {
			fs.StringVar(&output, name, output, "table or json")
		}
		fs.DurationVar(&do.StuckAfter, "stuck-after", do.StuckAfter, "terminating time after which an object is stuck")
		fs.DurationVar(&do.PendingAfter, "pending-after", do.PendingAfter, "Pending/Installing or not-READY time after which a CSV or catalog is reported")
		fs.DurationVar(&do.Recheck, "recheck", do.Recheck, "delay before confirming a Subscription drift")
		// OLM's copies (label olm.copiedFrom) are left out as OLM's own informers leave them
		// out: no check reports a copy, and on a cluster of many namespaces they are most of
		// the CSVs, each with its original's annotations.
		do.SkipCopiedCSVs = true
		fs.StringVar(&olmguardNamespace, "olmguard-namespace", olmguardNamespace, "olmguard's namespace, where the webhook probe dry-runs its ConfigMap")
		fs.IntVar(&do.CopiedCSVsAbove, "copied-csvs-above", do.CopiedCSVsAbove, "report OLM's copied CSVs when more than this many (0: never)")
		fs.BoolFunc("include-copied-csvs", "also read CSVs labelled olm.copiedFrom (OLM's copies; none is reported, OLM ignores them)", func(v string) error {
			include, err := strconv.ParseBool(v)
			do.SkipCopiedCSVs = !include
			return err
		})
	default:
		fmt.Fprintf(stderr, "kubectl-olmguard: unknown command %q\n%s", cmd, usage)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		fmt.Fprintf(stderr, "kubectl-olmguard %s: %v\n%s", cmd, err, usage)
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "kubectl-olmguard %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return 2
	}
	if stopTimeout <= 0 {
		fmt.Fprintf(stderr, "kubectl-olmguard uninstall: --stop-timeout must be positive\n")
		return 2
	}
	if output != "table" && output != "json" {
		fmt.Fprintf(stderr, "kubectl-olmguard doctor: --output %q: must be table or json\n", output)
		return 2
	}
	if do.StuckAfter < 0 || do.Recheck < 0 || do.PendingAfter < 0 {
		fmt.Fprintf(stderr, "kubectl-olmguard doctor: --stuck-after, --pending-after and --recheck must not be negative\n")
		return 2
	}
	c, err := newClient()
	if err != nil {
		fmt.Fprintf(stderr, "kubectl-olmguard: %v\n", err)
		return 2
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if cmd == "uninstall" {
		if err := uninstall.Run(ctx, c, stdout, stopTimeout); err != nil {
			fmt.Fprintf(stderr, "kubectl-olmguard uninstall: %s\n", printable.Line(err.Error()))
			return 1
		}
		return 0
	}
	do.Progress = stderr
	report, err := doctor.Audit(ctx, c, do)
	if err != nil {
		// An error may quote what it read (a name, an apiserver message): printed escaped.
		fmt.Fprintf(stderr, "kubectl-olmguard doctor: %s\n", printable.Line(err.Error()))
		return 2
	}
	if do.Namespace == "" {
		// The path the kube-apiserver takes to the webhook (every webhook fails open, silently).
		doctor.ProbeWebhook(ctx, c, olmguardNamespace, report)
	}
	write := doctor.WriteTable
	if output == "json" {
		write = doctor.WriteJSON
	}
	if err := write(stdout, report); err != nil {
		fmt.Fprintf(stderr, "kubectl-olmguard doctor: %v\n", err)
		return 2
	}
	switch {
	case len(report.Findings) > 0:
		return 1
	case len(report.Skipped) > 0:
		return 2
	}
	return 0
}

func newClient() (client.Client, error) {
	cfg, err := config.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = kubeapi.UserAgent("kubectl-olmguard")
	s, err := olmscheme.New()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}
