package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/uninstall"
)

const uninstallLong = `uninstall removes olmguard's hooks into OLM so that removing olmguard leaves nothing stuck. In
this order, printing each change as it makes it:
  1. it scales olmguard's Deployments (label app.kubernetes.io/name=olmguard, in olmguard's
     namespace) to zero and waits up to --stop-timeout until no pod with that label is left
     there (a controller still stopping would add the finalizer back);
  2. it deletes olmguard's MutatingWebhookConfigurations and ValidatingWebhookConfigurations
     (same label);
  3. it removes the finalizer olmguard.io/cleanup from every CSV that holds it, or only from
     those of the namespace -n names (CSVs read again once olmguard has stopped).
OLM's own finalizers and objects are not touched, and uninstall deletes nothing else: delete
olmguard's namespace, RBAC and the rest afterwards (helm uninstall, or kubectl delete
--ignore-not-found -k).

olmguard's namespace: --olmguard-namespace, else the namespace of the Service its webhook
configurations call, else (none left, or several) every namespace. -n NS limits step 3 to the
CSVs of NS; steps 1 and 2 still stop olmguard, so that nothing adds the finalizer back. Without
-n, every namespace: the current context's namespace is not used.

--dry-run lists every change it would make now and changes nothing. Otherwise it lists them and
asks for confirmation on a terminal; --yes skips the question. Without a terminal to ask on and
without --yes it refuses (exit status 2) and changes nothing.

Exit status: 0 done (or a dry run), 1 the uninstall failed or was not confirmed, 2 it could not
run (a usage error, no --yes without a terminal, the cluster unreachable).`

const uninstallExample = `  kubectl olmguard uninstall --dry-run        # every change it would make
  kubectl olmguard uninstall                  # lists them, asks, then makes them
  kubectl olmguard uninstall --yes --olmguard-namespace olmguard-system
  kubectl olmguard uninstall --yes -n team-a  # release only team-a's CSVs`

func newUninstall(cf *genericclioptions.ConfigFlags, s streams) *cobra.Command {
	o := uninstall.Options{StopTimeout: uninstall.DefaultStopTimeout}
	var dryRun, yes bool
	cmd := &cobra.Command{
		Use:     "uninstall",
		Short:   "Stop olmguard, remove its webhook configurations, then its finalizer from every CSV",
		Long:    uninstallLong,
		Example: uninstallExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.StopTimeout <= 0 {
				return errors.New("--stop-timeout must be positive")
			}
			if cf.Namespace != nil {
				o.Namespace = *cf.Namespace
			}
			if !dryRun && !yes && !s.terminal() {
				return failed(s.err, "uninstall", errors.New("refusing to change the cluster without --yes: there is no terminal to confirm on (--dry-run lists the changes)"), 2)
			}
			c, err := newClient(cf, s.err)
			if err != nil {
				return failed(s.err, "uninstall", err, 2)
			}
			ctx := cmd.Context()
			if o.OlmguardNamespace == "" {
				if o.OlmguardNamespace, err = uninstall.ServedFrom(ctx, c); err != nil {
					return failed(s.err, "uninstall", err, 2)
				}
			}
			changes, err := uninstall.Survey(ctx, c, o)
			if err != nil {
				return failed(s.err, "uninstall", err, 2)
			}
			where := "every namespace (no webhook configuration names one)"
			if o.OlmguardNamespace != "" {
				where = "namespace " + printable.Line(o.OlmguardNamespace)
			}
			if dryRun {
				fmt.Fprintln(s.out, "Dry run: nothing is changed.")
			}
			fmt.Fprintf(s.out, "olmguard's Deployments and pods are looked for in %s.\n", where)
			if dryRun {
				fmt.Fprintln(s.out, "uninstall would make these changes, in this order:")
			} else {
				fmt.Fprintln(s.out, "uninstall will make these changes, in this order:")
			}
			for _, ch := range changes {
				fmt.Fprintf(s.out, "  %s\n", ch)
			}
			if len(changes) == 0 {
				fmt.Fprintln(s.out, "  none: no Deployment, pod or webhook configuration of olmguard, no CSV with its finalizer")
			}
			fmt.Fprintln(s.out, "Nothing else is deleted (olmguard's namespace, RBAC, Services: helm uninstall or kubectl delete -k).")
			if dryRun {
				return nil
			}
			if !yes && !confirm(s) {
				return failed(s.err, "uninstall", errors.New("not confirmed: nothing changed"), 1)
			}
			if err := uninstall.RunWith(ctx, c, s.out, o); err != nil {
				return failed(s.err, "uninstall", err, 1)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&dryRun, "dry-run", false, "list every change uninstall would make, and make none")
	f.BoolVarP(&yes, "yes", "y", false, "make the changes without asking for confirmation (needed without a terminal)")
	f.DurationVar(&o.StopTimeout, "stop-timeout", o.StopTimeout, "how long to wait for olmguard's pods to stop")
	f.StringVar(&o.OlmguardNamespace, "olmguard-namespace", "", "the namespace olmguard runs in: only its Deployments and pods there are scaled and waited for (default: the namespace of the Service its webhook configurations call, else every namespace)")
	return cmd
}

// confirm asks on stderr and reads the answer from stdin: only y or yes confirms.
func confirm(s streams) bool {
	fmt.Fprint(s.err, "Make these changes? Type yes to confirm: ")
	line, _ := bufio.NewReader(s.in).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}
