package main

import (
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
)

const probeLong = `probe checks once that the kube-apiserver calls olmguard's webhook: it dry-runs (dryRun=All:
nothing is stored) the creation of a marked ConfigMap in olmguard's namespace, which olmguard's
mutating webhook must mark in the answer, as the controller's webhook probe does every minute.
Every webhook fails open, so a webhook the kube-apiserver cannot reach is otherwise silent.

It needs the create permission on ConfigMaps in --olmguard-namespace (a dry run asks for it) and
nothing else. The chart's test (helm test <release>) runs it.

Exit status: 0 the webhook was called, 1 it was not (or the dry run failed), 2 the probe could not
run (the cluster unreachable, no permission, no such namespace).`

const probeExample = `  kubectl olmguard probe
  kubectl olmguard probe --olmguard-namespace olmguard-system`

func newProbe(cf *genericclioptions.ConfigFlags, s streams) *cobra.Command {
	namespace := "olmguard-system"
	cmd := &cobra.Command{
		Use:     "probe",
		Short:   "Check once that the kube-apiserver calls olmguard's webhook (a dry-run create it must mark)",
		Long:    probeLong,
		Example: probeExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := newClient(cf, s.err)
			if err != nil {
				return failed(s.err, "probe", err, 2)
			}
			nonce := webhookprobe.Nonce()
			obj := webhookprobe.Object(namespace, nonce)
			err = c.Create(cmd.Context(), obj, client.DryRunAll, client.FieldOwner(olmguard.FieldManager))
			res := webhookprobe.Judge(nonce, obj.GetAnnotations(), err)
			switch {
			case res.OK():
				fmt.Fprintf(s.out, "%s: %s\n", res.Outcome, res.Message)
				return nil
			case apierrors.IsForbidden(err), apierrors.IsNotFound(err), apierrors.IsUnauthorized(err):
				return failed(s.err, "probe", fmt.Errorf("cannot dry-run create a ConfigMap in %s: %w", namespace, err), 2)
			}
			fmt.Fprintf(s.out, "%s: %s\n", res.Outcome, printable.Line(res.Message))
			return exitError{1}
		},
	}
	cmd.Flags().StringVar(&namespace, "olmguard-namespace", namespace, "olmguard's namespace, where the probe ConfigMap is dry-run created (needs create on configmaps there)")
	return cmd
}
