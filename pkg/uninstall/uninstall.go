// Package uninstall removes olmguard from a cluster without leaving anything stuck: first it stops
// olmguard's Deployments, waits for their pods to go and removes its webhook configurations (so
// nothing adds the finalizer again), then it removes its finalizer from every CSV.
// OLM's own finalizers and objects are never touched.
package uninstall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/write"
)

// RemoveWebhookConfigurations deletes olmguard's webhook configurations (label
// app.kubernetes.io/name=olmguard): the cluster then behaves as stock OLM.
func RemoveWebhookConfigurations(ctx context.Context, c client.Client) error {
	var errs []error
	for _, o := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{},
	} {
		if err := c.DeleteAllOf(ctx, o, client.MatchingLabels{olmguard.NameLabel: olmguard.Name}); err != nil {
			errs = append(errs, fmt.Errorf("removing olmguard's %T: %w", o, err))
		}
	}
	return errors.Join(errs...)
}

// ReleaseFinalizers removes olmguard.io/cleanup from every CSV that has it and returns how many.
func ReleaseFinalizers(ctx context.Context, c client.Client, progress io.Writer) (int, error) {
	list := &v1alpha1.ClusterServiceVersionList{}
	if err := c.List(ctx, list); err != nil {
		return 0, fmt.Errorf("listing CSVs: %w", err)
	}
	released := 0
	for i := range list.Items {
		csv := &list.Items[i]
		ops := cleanup.RemoveFinalizerPatch(csv.Finalizers, olmguard.CleanupFinalizer)
		if len(ops) == 0 {
			continue
		}
		if _, err := write.JSONPatch(ctx, c, csv, ops); err != nil {
			return released, fmt.Errorf("releasing CSV %s/%s: %w", csv.Namespace, csv.Name, err)
		}
		released++
		fmt.Fprintf(progress, "released %s/%s\n", csv.Namespace, csv.Name)
	}
	return released, nil
}

// StopDeployments scales olmguard's Deployments (label app.kubernetes.io/name=olmguard) to zero,
// so its controller does not add the finalizer back. It returns how many it scaled.
func StopDeployments(ctx context.Context, c client.Client, out io.Writer) (int, error) {
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list, client.MatchingLabels{olmguard.NameLabel: olmguard.Name}); err != nil {
		return 0, fmt.Errorf("listing olmguard's Deployments: %w", err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		if _, err := write.MergePatch(ctx, c, d, []byte(`{"spec":{"replicas":0}}`)); err != nil {
			return i, fmt.Errorf("scaling %s/%s to zero: %w", d.Namespace, d.Name, err)
		}
		fmt.Fprintf(out, "scaled %s/%s to zero\n", d.Namespace, d.Name)
	}
	return len(list.Items), nil
}

// DefaultStopTimeout is how long Run waits for olmguard's pods to stop.
const DefaultStopTimeout = 2 * time.Minute

// WaitStopped waits until no pod of olmguard (label app.kubernetes.io/name=olmguard) is left,
// terminating ones included: a controller still shutting down after its Deployment was scaled to
// zero adds the finalizer back to a CSV it reconciles (a real-node uninstall showed it). After
// timeout it fails naming the pods left.
func WaitStopped(ctx context.Context, c client.Client, out io.Writer, timeout, interval time.Duration) error {
	var left []string
	said := false
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.MatchingLabels{olmguard.NameLabel: olmguard.Name}); err != nil {
			return false, fmt.Errorf("listing olmguard's pods: %w", err)
		}
		left = left[:0]
		for _, p := range pods.Items {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		if len(left) > 0 && !said {
			fmt.Fprintf(out, "waiting for %d olmguard pods to stop\n", len(left))
			said = true
		}
		return len(left) == 0, nil
	})
	if err != nil && len(left) > 0 {
		return fmt.Errorf("olmguard's pods %s still exist after %s (a pod on a lost node stays Terminating: delete it with kubectl delete pod --force --grace-period=0, then run uninstall again): %w",
			strings.Join(left, ", "), timeout, err)
	}
	return err
}

// Run uninstalls olmguard's hooks into OLM: it stops olmguard's Deployments and waits up to
// stopTimeout for their pods to go, removes its webhook configurations, then its finalizers.
func Run(ctx context.Context, c client.Client, out io.Writer, stopTimeout time.Duration) error {
	if _, err := StopDeployments(ctx, c, out); err != nil {
		return err
	}
	if err := WaitStopped(ctx, c, out, stopTimeout, time.Second); err != nil {
		return err
	}
	if err := RemoveWebhookConfigurations(ctx, c); err != nil {
		return err
	}
	fmt.Fprintf(out, "removed webhook configurations %s and %s\n", olmguard.MutatingWebhookConfigurationName, olmguard.ValidatingWebhookConfigurationName)
	n, err := ReleaseFinalizers(ctx, c, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "released %s from %d CSVs; olmguard no longer affects OLM (delete its namespace and RBAC to remove it entirely)\n", olmguard.CleanupFinalizer, n)
	return nil
}
