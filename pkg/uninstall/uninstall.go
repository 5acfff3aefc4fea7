// Package uninstall removes olmguard from a cluster without leaving anything stuck: first it stops
// olmguard's Deployments, waits for their pods to go and removes its webhook configurations (so
// nothing adds the finalizer again), then it removes its finalizer from every CSV (or those of one
// namespace). OLM's own finalizers and objects are never touched. Survey lists every change an
// uninstall makes without making one (kubectl olmguard uninstall --dry-run).
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/write"
)

// Options scope an uninstall.
type Options struct {
	// Namespace limits the finalizer release to the CSVs of one namespace; "" releases it from
	// every CSV of the cluster.
	Namespace string
	// OlmguardNamespace limits the Deployments scaled to zero, and the pods waited for, to the
	// namespace olmguard runs in; "" takes those of every namespace.
	OlmguardNamespace string
	// StopTimeout is how long to wait for olmguard's pods to stop (0: DefaultStopTimeout).
	StopTimeout time.Duration
}

// DefaultStopTimeout is how long Run waits for olmguard's pods to stop.
const DefaultStopTimeout = 2 * time.Minute

// Change is one step of an uninstall: what it does to one object.
type Change struct {
	// Resource is the object's resource as kubectl names it, e.g. deployment.apps.
	Resource, Namespace, Name string
	// Action says what is done to it, e.g. "delete".
	Action string
}

// String is the change on one line, kubectl's way: resource/name [-n namespace]: action. The names
// are escaped (a CSV's name is a tenant's).
func (c Change) String() string {
	ns := ""
	if c.Namespace != "" {
		ns = " -n " + printable.Line(c.Namespace)
	}
	return fmt.Sprintf("%s/%s%s: %s", c.Resource, printable.Line(c.Name), ns, c.Action)
}

// ours selects olmguard's objects.
var ours = client.MatchingLabels{olmguard.NameLabel: olmguard.Name}

// inNamespace is the list option of ns ("" every namespace).
func inNamespace(ns string) []client.ListOption {
	if ns == "" {
		return []client.ListOption{ours}
	}
	return []client.ListOption{ours, client.InNamespace(ns)}
}

// Survey lists, in the order an uninstall makes them, every change it would make now, and changes
// nothing: each Deployment scaled to zero, each pod waited for, each webhook configuration deleted,
// each CSV whose finalizer is removed.
func Survey(ctx context.Context, c client.Reader, o Options) ([]Change, error) {
	var changes []Change
	deps := &appsv1.DeploymentList{}
	if err := c.List(ctx, deps, inNamespace(o.OlmguardNamespace)...); err != nil {
		return nil, fmt.Errorf("listing olmguard's Deployments: %w", err)
	}
	for _, d := range deps.Items {
		replicas := int32(1)
		if d.Spec.Replicas != nil {
			replicas = *d.Spec.Replicas
		}
		changes = append(changes, Change{"deployment.apps", d.Namespace, d.Name, fmt.Sprintf("scale from %d to 0 replicas", replicas)})
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, inNamespace(o.OlmguardNamespace)...); err != nil {
		return nil, fmt.Errorf("listing olmguard's pods: %w", err)
	}
	for _, p := range pods.Items {
		changes = append(changes, Change{"pod", p.Namespace, p.Name, fmt.Sprintf("wait until it is gone (up to %s)", stopTimeout(o))})
	}
	for _, w := range webhookConfigurationKinds {
		list := w.list()
		if err := c.List(ctx, list, ours); err != nil {
			return nil, fmt.Errorf("listing olmguard's %ss: %w", w.resource, err)
		}
		for _, name := range w.names(list) {
			changes = append(changes, Change{w.resource, "", name, "delete"})
		}
	}
	csvs, err := finalized(ctx, c, o.Namespace)
	if err != nil {
		return nil, err
	}
	for _, csv := range csvs {
		changes = append(changes, Change{"clusterserviceversion.operators.coreos.com", csv.Namespace, csv.Name, "remove finalizer " + olmguard.CleanupFinalizer})
	}
	return changes, nil
}

func stopTimeout(o Options) time.Duration {
	if o.StopTimeout <= 0 {
		return DefaultStopTimeout
	}
	return o.StopTimeout
}

// webhookConfigurationKinds are the kinds of olmguard's webhook configurations.
var webhookConfigurationKinds = []struct {
	resource string
	list     func() client.ObjectList
	names    func(client.ObjectList) []string
	object   func(name string) client.Object
}{
	{"mutatingwebhookconfiguration.admissionregistration.k8s.io",
		func() client.ObjectList { return &admissionregistrationv1.MutatingWebhookConfigurationList{} },
		func(l client.ObjectList) (n []string) {
			for _, o := range l.(*admissionregistrationv1.MutatingWebhookConfigurationList).Items {
				n = append(n, o.Name)
			}
			return n
		},
		func(name string) client.Object {
			o := &admissionregistrationv1.MutatingWebhookConfiguration{}
			o.Name = name
			return o
		}},
	{"validatingwebhookconfiguration.admissionregistration.k8s.io",
		func() client.ObjectList { return &admissionregistrationv1.ValidatingWebhookConfigurationList{} },
		func(l client.ObjectList) (n []string) {
			for _, o := range l.(*admissionregistrationv1.ValidatingWebhookConfigurationList).Items {
				n = append(n, o.Name)
			}
			return n
		},
		func(name string) client.Object {
			o := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			o.Name = name
			return o
		}},
}

// ServedFrom returns the namespace of the Service olmguard's webhook configurations call, when
// they all call one namespace's; "" when there is none (removed already, or called by URL) or
// they name several. Only a cluster admin writes webhook configurations, so unlike the label of
// a Deployment or pod it says where olmguard runs.
func ServedFrom(ctx context.Context, c client.Reader) (string, error) {
	seen := map[string]bool{}
	mutating := &admissionregistrationv1.MutatingWebhookConfigurationList{}
	if err := c.List(ctx, mutating, ours); err != nil {
		return "", fmt.Errorf("listing olmguard's MutatingWebhookConfigurations: %w", err)
	}
	for _, w := range mutating.Items {
		for _, h := range w.Webhooks {
			if h.ClientConfig.Service != nil {
				seen[h.ClientConfig.Service.Namespace] = true
			}
		}
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := c.List(ctx, validating, ours); err != nil {
		return "", fmt.Errorf("listing olmguard's ValidatingWebhookConfigurations: %w", err)
	}
	for _, w := range validating.Items {
		for _, h := range w.Webhooks {
			if h.ClientConfig.Service != nil {
				seen[h.ClientConfig.Service.Namespace] = true
			}
		}
	}
	if len(seen) != 1 {
		return "", nil
	}
	for ns := range seen {
		return ns, nil
	}
	return "", nil
}

// RemoveWebhookConfigurations deletes olmguard's webhook configurations (label
// app.kubernetes.io/name=olmguard): the cluster then behaves as stock OLM.
func RemoveWebhookConfigurations(ctx context.Context, c client.Client) error {
	return removeWebhookConfigurations(ctx, c, io.Discard)
}

// removeWebhookConfigurations deletes each of olmguard's webhook configurations, saying so on out.
func removeWebhookConfigurations(ctx context.Context, c client.Client, out io.Writer) error {
	var errs []error
	for _, w := range webhookConfigurationKinds {
		list := w.list()
		if err := c.List(ctx, list, ours); err != nil {
			errs = append(errs, fmt.Errorf("listing olmguard's %ss: %w", w.resource, err))
			continue
		}
		for _, name := range w.names(list) {
			err := c.Delete(ctx, w.object(name))
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs = append(errs, fmt.Errorf("deleting %s/%s: %w", w.resource, name, err))
			default:
				fmt.Fprintf(out, "%s\n", Change{w.resource, "", name, "deleted"})
			}
		}
	}
	return errors.Join(errs...)
}

// finalized returns the CSVs of ns ("" every namespace) that hold olmguard's finalizer.
func finalized(ctx context.Context, c client.Reader, ns string) ([]v1alpha1.ClusterServiceVersion, error) {
	list := &v1alpha1.ClusterServiceVersionList{}
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, fmt.Errorf("listing CSVs: %w", err)
	}
	var held []v1alpha1.ClusterServiceVersion
	for _, csv := range list.Items {
		if len(cleanup.RemoveFinalizerPatch(csv.Finalizers, olmguard.CleanupFinalizer)) > 0 {
			held = append(held, csv)
		}
	}
	return held, nil
}

// ReleaseFinalizers removes olmguard.io/cleanup from every CSV of ns ("" every namespace) that has
// it and returns how many.
func ReleaseFinalizers(ctx context.Context, c client.Client, ns string, progress io.Writer) (int, error) {
	csvs, err := finalized(ctx, c, ns)
	if err != nil {
		return 0, err
	}
	released := 0
	for i := range csvs {
		csv := &csvs[i]
		ops := cleanup.RemoveFinalizerPatch(csv.Finalizers, olmguard.CleanupFinalizer)
		if _, err := write.JSONPatch(ctx, c, csv, ops); err != nil {
			return released, fmt.Errorf("releasing CSV %s/%s: %w", csv.Namespace, csv.Name, err)
		}
		released++
		fmt.Fprintf(progress, "%s\n", Change{"clusterserviceversion.operators.coreos.com", csv.Namespace, csv.Name, "removed finalizer " + olmguard.CleanupFinalizer})
	}
	return released, nil
}

// StopDeployments scales olmguard's Deployments (label app.kubernetes.io/name=olmguard) of ns (""
// every namespace) to zero, so its controller does not add the finalizer back. It returns how many
// it scaled.
func StopDeployments(ctx context.Context, c client.Client, ns string, out io.Writer) (int, error) {
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list, inNamespace(ns)...); err != nil {
		return 0, fmt.Errorf("listing olmguard's Deployments: %w", err)
	}
	for i := range list.Items {
		d := &list.Items[i]
		if _, err := write.MergePatch(ctx, c, d, []byte(`{"spec":{"replicas":0}}`)); err != nil {
			return i, fmt.Errorf("scaling %s/%s to zero: %w", d.Namespace, d.Name, err)
		}
		fmt.Fprintf(out, "%s\n", Change{"deployment.apps", d.Namespace, d.Name, "scaled to 0 replicas"})
	}
	return len(list.Items), nil
}

// WaitStopped waits until no pod of olmguard (label app.kubernetes.io/name=olmguard) is left in ns
// ("" every namespace), terminating ones included: a controller still shutting down after its
// Deployment was scaled to zero adds the finalizer back to a CSV it reconciles (a real-node
// uninstall showed it). After timeout it fails naming the pods left.
func WaitStopped(ctx context.Context, c client.Client, ns string, out io.Writer, timeout, interval time.Duration) error {
	var left []string
	said := false
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, inNamespace(ns)...); err != nil {
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

// Run uninstalls olmguard's hooks into OLM from the whole cluster (RunWith with every namespace).
func Run(ctx context.Context, c client.Client, out io.Writer, stopTimeout time.Duration) error {
	return RunWith(ctx, c, out, Options{StopTimeout: stopTimeout})
}

// RunWith uninstalls olmguard's hooks into OLM: it scales olmguard's Deployments to zero and waits
// up to o.StopTimeout for their pods to go, deletes its webhook configurations, then removes its
// finalizer from the CSVs (of o.Namespace, or all), read again once olmguard has stopped. It
// prints each change on out as it makes it.
func RunWith(ctx context.Context, c client.Client, out io.Writer, o Options) error {
	if _, err := StopDeployments(ctx, c, o.OlmguardNamespace, out); err != nil {
		return err
	}
	if err := WaitStopped(ctx, c, o.OlmguardNamespace, out, stopTimeout(o), time.Second); err != nil {
		return err
	}
	if err := removeWebhookConfigurations(ctx, c, out); err != nil {
		return err
	}
	n, err := ReleaseFinalizers(ctx, c, o.Namespace, out)
	if err != nil {
		return err
	}
	where := "every namespace"
	if o.Namespace != "" {
		where = "namespace " + printable.Line(o.Namespace)
	}
	fmt.Fprintf(out, "released %s from %d CSVs (in %s); olmguard no longer affects OLM (delete its namespace and RBAC to remove it entirely)\n", olmguard.CleanupFinalizer, n, where)
	return nil
}
