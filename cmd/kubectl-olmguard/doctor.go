package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/doctor"
)

// outputs are doctor's -o values and their writers.
var outputs = map[string]func(io.Writer, *doctor.Report) error{
	"table": doctor.WriteTable,
	"json":  doctor.WriteJSON,
	"yaml":  doctor.WriteYAML,
}

// outputNames are doctor's -o values in the order help and completion list them.
var outputNames = []string{"table", "json", "yaml"}

const doctorLong = `doctor audits the cluster for the OLM failures olmguard fixes (F1–F5) and those it reports
(OLM: orphan CSVs, stuck installs, failed unpacks, OperatorGroups, catalogs, packageserver), and
prints each problem with its evidence and a fix.

Namespaces, as kubectl's: the namespace of -n, else the current context's namespace ("default"
when it names none); -A (--all-namespaces) audits every namespace, and only a whole-cluster audit
counts OLM's copied CSVs (--copied-csvs-above).

Exit status: 0 healthy, 1 problems found, 2 the audit could not run or was incomplete (a kind it
may not read is listed as skipped). A whole-cluster audit also checks, with a dry-run create in
--olmguard-namespace, that the kube-apiserver calls olmguard's webhook. Progress and the apiserver's warnings go to stderr: with
-o json or -o yaml, stdout holds the report only.`

const doctorExample = `  kubectl olmguard doctor -A                  # every namespace
  kubectl olmguard doctor -n operators -o json
  kubectl olmguard --context prod doctor -A -o yaml`

func newDoctor(cf *genericclioptions.ConfigFlags, s streams) *cobra.Command {
	o := doctor.DefaultOptions()
	// OLM's copies (label olm.copiedFrom) are left out as OLM's own informers leave them out: no
	// check reports a copy, and on a cluster of many namespaces they are most of the CSVs, each
	// with its original's annotations.
	o.SkipCopiedCSVs = true
	var all, includeCopies bool
	output, olmguardNamespace := "table", "olmguard-system"
	cmd := &cobra.Command{
		Use:     "doctor",
		Short:   "Audit the cluster for the OLM failures olmguard fixes (F1–F5) and those it reports",
		Long:    doctorLong,
		Example: doctorExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			write, ok := outputs[output]
			if !ok {
				return fmt.Errorf("--output %q: must be table, json or yaml", output)
			}
			if o.StuckAfter < 0 || o.Recheck < 0 || o.PendingAfter < 0 {
				return errors.New("--stuck-after, --pending-after and --recheck must not be negative")
			}
			if o.CopiedCSVsAbove < 0 {
				return errors.New("--copied-csvs-above must not be negative")
			}
			ns, err := doctorNamespace(cf, all)
			if err != nil {
				return err
			}
			o.Namespace = ns
			o.SkipCopiedCSVs = !includeCopies
			c, err := newClient(cf, s.err)
			if err != nil {
				return failed(s.err, "doctor", err, 2)
			}
			o.Progress = s.err
			report, err := doctor.Audit(cmd.Context(), c, o)
			if err != nil {
				return failed(s.err, "doctor", err, 2)
			}
			if o.Namespace == "" {
				// The path the kube-apiserver takes to the webhook (every webhook fails open, silently).
				doctor.ProbeWebhook(cmd.Context(), c, olmguardNamespace, report)
			}
			if err := write(s.out, report); err != nil {
				return failed(s.err, "doctor", err, 2)
			}
			switch {
			case len(report.Findings) > 0:
				return exitError{1}
			case len(report.Skipped) > 0:
				return exitError{2}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVarP(&all, "all-namespaces", "A", false, "audit every namespace (default: -n, else the current context's namespace)")
	f.StringVarP(&output, "output", "o", output, "output format: table, json or yaml")
	f.DurationVar(&o.StuckAfter, "stuck-after", o.StuckAfter, "how long a CSV or catalog pod may be terminating before it is stuck")
	f.DurationVar(&o.PendingAfter, "pending-after", o.PendingAfter, "how long a CSV may stay Pending/Installing, or a catalog not READY, before it is reported")
	f.DurationVar(&o.Recheck, "recheck", o.Recheck, "wait before confirming a Subscription out of step with its plan")
	f.BoolVar(&includeCopies, "include-copied-csvs", false, "also read CSVs labelled olm.copiedFrom, OLM's copies of an AllNamespaces operator's CSV (left out by default, as OLM's own informers leave them out)")
	f.StringVar(&olmguardNamespace, "olmguard-namespace", olmguardNamespace, "olmguard's namespace: a whole-cluster audit (-A) checks that the kube-apiserver calls olmguard's webhook with a dry-run create of a ConfigMap there, which stores nothing but needs create on configmaps in it")
	f.IntVar(&o.CopiedCSVsAbove, "copied-csvs-above", o.CopiedCSVsAbove, "report OLM's copies of operators installed for all namespaces when they are more than this many, counted from the originals and the namespaces (0 leaves the check out; whole-cluster audits only)")
	_ = cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, prefix string) ([]string, cobra.ShellCompDirective) {
		var names []string
		for _, n := range outputNames {
			if strings.HasPrefix(n, prefix) {
				names = append(names, n)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	})
	return cmd
}

// doctorNamespace is the namespace doctor audits ("" for all), by kubectl's rule: -A all; else -n;
// else the current context's namespace ("default" when it names none, the pod's own in a cluster).
func doctorNamespace(cf *genericclioptions.ConfigFlags, all bool) (string, error) {
	explicit := cf.Namespace != nil && *cf.Namespace != ""
	if all {
		if explicit {
			return "", errors.New("--all-namespaces (-A) and --namespace (-n) exclude each other")
		}
		return "", nil
	}
	ns, _, err := cf.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("the current context's namespace: %w", err)
	}
	return ns, nil
}

// failed prints why a command could not do its work, escaped (an error may quote what it read: a
// name, an apiserver message), and ends it with code.
func failed(stderr io.Writer, cmd string, err error, code int) error {
	fmt.Fprintf(stderr, "kubectl olmguard %s: %s\n", cmd, printable.Line(err.Error()))
	return exitError{code}
}
