// Package uninstall removes olmguard from a cluster without leaving anything stuck: first it stops
// olmguard's Deployments and removes its webhook configurations (so nothing adds the finalizer
// again), then it removes its finalizer from every CSV.
// OLM's own finalizers and objects are never touched.
package uninstall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
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
		body, err := json.Marshal(ops)
		if err != nil {
			return released, err
		}
		if err := c.Patch(ctx, csv, client.RawPatch(types.JSONPatchType, body)); client.IgnoreNotFound(err) != nil {
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
		if err := c.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`))); client.IgnoreNotFound(err) != nil {
			return i, fmt.Errorf("scaling %s/%s to zero: %w", d.Namespace, d.Name, err)
		}
		fmt.Fprintf(out, "scaled %s/%s to zero\n", d.Namespace, d.Name)
	}
	return len(list.Items), nil
}

// Run uninstalls olmguard's hooks into OLM: it stops olmguard's Deployments, removes its webhook
// configurations, then its finalizers.
func Run(ctx context.Context, c client.Client, out io.Writer) error {
	if _, err := StopDeployments(ctx, c, out); err != nil {
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
