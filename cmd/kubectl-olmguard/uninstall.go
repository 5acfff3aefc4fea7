package main

import (
	"errors"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/olmguard/olmguard/pkg/uninstall"
)

const uninstallLong = `uninstall removes olmguard's hooks into OLM so that removing olmguard leaves nothing stuck:
  1. it scales olmguard's Deployments (label app.kubernetes.io/name=olmguard) to zero and waits
     up to --stop-timeout for their pods to stop (a controller still stopping would add the
     finalizer back);
  2. it deletes olmguard's webhook configurations (same label);
  3. it removes olmguard.io/cleanup from every CSV that has it.
OLM's own finalizers and objects are not touched. It deletes nothing else: delete olmguard's
manifests afterwards (helm uninstall, or kubectl delete --ignore-not-found -k).`

func newUninstall(cf *genericclioptions.ConfigFlags, s streams) *cobra.Command {
	stopTimeout := uninstall.DefaultStopTimeout
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Stop olmguard, remove its webhook configurations, then its finalizer from every CSV",
		Long:  uninstallLong,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cf.Namespace != nil && *cf.Namespace != "" {
				return errors.New("uninstall acts on the whole cluster and takes no --namespace (-n)")
			}
			if stopTimeout <= 0 {
				return errors.New("--stop-timeout must be positive")
			}
			c, err := newClient(cf, s.err)
			if err != nil {
				return failed(s.err, "uninstall", err, 2)
			}
			if err := uninstall.Run(cmd.Context(), c, s.out, stopTimeout); err != nil {
				return failed(s.err, "uninstall", err, 1)
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&stopTimeout, "stop-timeout", stopTimeout, "how long to wait for olmguard's pods to stop")
	return cmd
}
