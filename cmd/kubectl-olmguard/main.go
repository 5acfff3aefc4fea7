// Command kubectl-olmguard is olmguard's kubectl plugin:
//
//	kubectl olmguard doctor      audit the cluster for the OLM failures olmguard fixes (F1–F5)
//	kubectl olmguard uninstall   scale olmguard to zero, remove its webhook configurations, then its finalizers
//	kubectl olmguard completion  shell completion scripts (bash, zsh, fish)
//	kubectl olmguard version     the version and commit it was built from
//
// It takes kubectl's connection flags (k8s.io/cli-runtime: --kubeconfig, --context, --as, ...).
// Run as kubectl_complete-olmguard (a link to the same binary), it answers kubectl's plugin
// completion requests.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/kubeapi"
	"github.com/olmguard/olmguard/internal/memlimit"
	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/internal/version"
	olmscheme "github.com/olmguard/olmguard/pkg/olm/scheme"
)

// doctorSoftLimit is the plugin's soft memory limit unless GOMEMLIMIT is set (docs/performance.md).
const doctorSoftLimit = 128 << 20

// completeName is the name kubectl looks for to complete `kubectl olmguard ...`: it runs
// `kubectl_complete-olmguard <args>` (kubectl v1.26+); this binary answers as `__complete <args>`.
const completeName = "kubectl_complete-olmguard"

func main() {
	// doctor keeps every Subscription and InstallPlan of the cluster while it reads the other
	// kinds page by page: at Go's default pace the pages' garbage doubles its peak (245 MiB on a
	// cluster of 2,000 namespaces, 191 at 50: docs/performance.md). An explicit GOGC still wins.
	memlimit.DefaultGCPercent(50)
	// And a soft memory limit (GOMEMLIMIT still wins, "off" included): on that cluster doctor's
	// live heap is 110 to 130 MB, and the collector's headroom took its peak to 197 to 217 MiB,
	// past its 200 MiB goal; with 128 MiB it peaked at 163 to 168 MiB, 1 to 2 s slower.
	memlimit.DefaultSoftLimit(doctorSoftLimit)
	os.Exit(run(completionArgs(os.Args[0], os.Args[1:]), os.Stdout, os.Stderr))
}

// completionArgs returns the arguments to run: those given, behind __complete when the binary was
// started as kubectl_complete-olmguard (kubectl's plugin completion) and they do not already ask
// for it.
func completionArgs(argv0 string, args []string) []string {
	name := strings.TrimSuffix(argv0[strings.LastIndexAny(argv0, `/\`)+1:], ".exe") // either separator: Windows too
	if name != completeName || (len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd)) {
		return args
	}
	return append([]string{cobra.ShellCompRequestCmd}, args...)
}

// streams are the command's standard streams; terminal reports whether in is one a person types
// on (uninstall asks for confirmation there).
type streams struct {
	in       io.Reader
	out, err io.Writer
	terminal func() bool
}

// exitError ends a command with a status after the command printed why.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run returns the exit status: 0 success, 1 problems found (doctor) or a failed uninstall, 2 usage
// errors and audits that could not run.
func run(args []string, stdout, stderr io.Writer) int {
	return runWith(args, streams{in: os.Stdin, out: stdout, err: stderr, terminal: stdinIsTerminal})
}

func runWith(args []string, s streams) int {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	root := newRoot(s)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	}
	// A usage error: a flag, a command or an argument unknown or wrong. cobra's message may span
	// lines (suggestions) and quote what was typed: one line, escaped.
	name := "kubectl olmguard"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	fmt.Fprintf(s.err, "%s: %s (see %s --help)\n", name, printable.Line(err.Error()), name)
	return 2
}

// stdinIsTerminal reports whether the standard input is a terminal (not /dev/null, which is a
// character device too, nor a pipe).
func stdinIsTerminal() bool { return term.IsTerminal(int(os.Stdin.Fd())) }

const rootLong = `kubectl olmguard audits a cluster running Operator Lifecycle Manager v0 for the failures
olmguard fixes and those it reports (doctor), and removes olmguard without leaving anything
stuck (uninstall).

It connects as kubectl does: --kubeconfig, --context, --cluster, --user, --as, --as-group,
--request-timeout and kubectl's other connection flags (default: $KUBECONFIG, ~/.kube/config,
or the pod's service account in a cluster). Warnings and progress go to stderr; stdout holds
the command's output only.`

func newRoot(s streams) *cobra.Command {
	cf := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "kubectl-olmguard",
		Short:         "Audit OLM v0 for the failures olmguard fixes, or remove olmguard",
		Long:          rootLong,
		Version:       version.Get().String("kubectl-olmguard"),
		SilenceErrors: true,
		SilenceUsage:  true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl olmguard"},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(s.in)
	root.SetOut(s.out)
	root.SetErr(s.err)
	cf.AddFlags(root.PersistentFlags())
	completeKubeconfigNames(root, cf)
	completeNamespaces(root, cf)
	root.AddCommand(newDoctor(cf, s), newUninstall(cf, s), newProbe(cf, s), newVersion(s))
	return root
}

// completeKubeconfigNames completes --context, --cluster and --user with the names of the
// kubeconfig (as --kubeconfig and $KUBECONFIG say).
func completeKubeconfigNames(root *cobra.Command, cf *genericclioptions.ConfigFlags) {
	for flag, names := range map[string]func(*clientcmdapi.Config) []string{
		"context": func(c *clientcmdapi.Config) []string { return slices.Sorted(maps.Keys(c.Contexts)) },
		"cluster": func(c *clientcmdapi.Config) []string { return slices.Sorted(maps.Keys(c.Clusters)) },
		"user":    func(c *clientcmdapi.Config) []string { return slices.Sorted(maps.Keys(c.AuthInfos)) },
	} {
		_ = root.RegisterFlagCompletionFunc(flag, func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
			raw, err := cf.ToRawKubeConfigLoader().RawConfig()
			if err != nil {
				return nil, cobra.ShellCompDirectiveError
			}
			var out []string
			for _, n := range names(&raw) {
				if strings.HasPrefix(n, prefix) {
					out = append(out, n)
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		})
	}
}

// completeNamespaces completes -n with the cluster's namespaces, as kubectl does (nothing when
// the cluster cannot be read).
func completeNamespaces(root *cobra.Command, cf *genericclioptions.ConfigFlags) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		c, err := newClient(cf, io.Discard)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list := &corev1.NamespaceList{}
		if err := c.List(cmd.Context(), list); err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, ns := range list.Items {
			if strings.HasPrefix(ns.Name, prefix) {
				out = append(out, ns.Name)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

func newVersion(s streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and commit this plugin was built from (also --version)",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintln(s.out, version.Get().String("kubectl-olmguard"))
		},
	}
}

// newClient connects as the connection flags say; the apiserver's warnings go to stderr, each
// once and escaped (they may quote what a tenant wrote).
func newClient(cf *genericclioptions.ConfigFlags, stderr io.Writer) (client.Client, error) {
	cfg, err := restConfig(cf, stderr)
	if err != nil {
		return nil, err
	}
	s, err := olmscheme.New()
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: s})
}

// restConfig is the connection flags' config with olmguard's user agent, warning printer and
// client-side limits (kubeapi.WithLimits, unless the kubeconfig sets its own): client-go's default
// of 5 requests a second made doctor -A on a cluster of 2,000 namespaces, 290 List pages, take
// about a minute (docs/performance.md).
func restConfig(cf *genericclioptions.ConfigFlags, stderr io.Writer) (*rest.Config, error) {
	cfg, err := cf.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg = kubeapi.WithLimits(rest.CopyConfig(cfg))
	cfg.UserAgent = kubeapi.UserAgent("kubectl-olmguard")
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = &warningPrinter{w: stderr, seen: map[string]bool{}}
	return cfg, nil
}

// warningPrinter prints each distinct warning of the apiserver once, as kubectl does, on its
// own escaped line.
type warningPrinter struct {
	mu   sync.Mutex
	w    io.Writer
	seen map[string]bool
}

func (p *warningPrinter) HandleWarningHeaderWithContext(_ context.Context, code int, _ string, msg string) {
	if code != 299 || msg == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[msg] {
		return
	}
	p.seen[msg] = true
	fmt.Fprintf(p.w, "Warning: %s\n", printable.Line(msg))
}
