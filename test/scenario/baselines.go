package scenario

import (
	"context"
	"errors"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/testenv"
)

// Leftovers counts the cluster-scoped objects of an uninstalled operator that are still there.
type Leftovers struct {
	// Labelled are ClusterRoles and ClusterRoleBindings with OLM's three owner labels.
	Labelled int
	// Webhooks are webhook configurations with the owner labels.
	Webhooks int
	// Bundled is the bundled ClusterRole OLM labels only olm.managed (OLM issue #2985).
	Bundled int
	// AuthReader is the kube-system auth-reader RoleBinding OLM never deletes.
	AuthReader int
}

// Total is the number of leftover objects.
func (l Leftovers) Total() int { return l.Labelled + l.Webhooks + l.Bundled + l.AuthReader }

// GammaCatalog serves an operator with cluster permissions, a bundled ClusterRole and a webhook.
func GammaCatalog(name string) *olmsim.Catalog {
	return &olmsim.Catalog{Name: name, Bundles: []olmsim.Bundle{{
		Package: "gamma", Channel: "stable", CSVName: "gamma.v1.0.0", Version: "1.0.0", Image: "registry.example/gamma-bundle:v1.0.0",
		ClusterPermissions: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list"}}},
		BundledClusterRole: name + "-gamma-metrics-reader",
		WebhookDeployment:  name + "-gamma-webhook",
	}}}
}

// GammaUpgradeCatalog serves gamma v1 and v2 (v2 replaces v1, both shipping the same bundled
// ClusterRole and webhook): installing it upgrades once, the usual life of an operator, and OLM
// labels the bundled ClusterRole olm.owner=gamma.v2.0.0 on the way (OLM issue #2985).
func GammaUpgradeCatalog(name string) *olmsim.Catalog {
	cat := GammaCatalog(name)
	v2 := cat.Bundles[0]
	v2.CSVName, v2.Version, v2.Replaces, v2.Image = "gamma.v2.0.0", "2.0.0", "gamma.v1.0.0", "registry.example/gamma-bundle:v2.0.0"
	cat.Bundles = append(cat.Bundles, v2)
	return cat
}

// InstallGamma installs the gamma operator of cat into ns, starting at the catalog's first
// bundle and upgrading to its last, and returns its Subscription.
func InstallGamma(ctx context.Context, sim *olmsim.Sim, cat *olmsim.Catalog, ns string) (*v1alpha1.Subscription, error) {
	if err := sim.AddCatalog(ctx, cat); err != nil {
		return nil, err
	}
	if _, err := sim.CreateOperatorGroup(ctx, ns, "og"); err != nil {
		return nil, err
	}
	sub := &v1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: "gamma", Namespace: ns},
		Spec: v1alpha1.SubscriptionSpec{CatalogSource: cat.Name, CatalogSourceNamespace: cat.Namespace, Package: "gamma",
			InstallPlanApproval: v1alpha1.ApprovalAutomatic, StartingCSV: cat.Bundles[0].CSVName},
	}
	if err := sim.Admin.Create(ctx, sub); err != nil {
		return nil, fmt.Errorf("creating Subscription %s/gamma: %w", ns, err)
	}
	_, err := sim.Install(ctx, ns, false)
	return sub, err
}

// CountLeftovers counts the cluster objects of the operator installed in ns from cat, at the
// catalog's last bundle.
func CountLeftovers(ctx context.Context, c client.Client, cat *olmsim.Catalog, ns string) (Leftovers, error) {
	var l Leftovers
	csv := cat.Bundles[len(cat.Bundles)-1].CSVName
	sel := client.MatchingLabels(olm.OwnerLabels(csv, ns))
	crs, crbs, vwcs := &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	for _, list := range []client.ObjectList{crs, crbs, vwcs} {
		if err := c.List(ctx, list, sel); err != nil {
			return l, err
		}
	}
	l.Labelled, l.Webhooks = len(crs.Items)+len(crbs.Items), len(vwcs.Items)
	exists := func(key types.NamespacedName, o client.Object) (int, error) {
		err := c.Get(ctx, key, o)
		if err == nil {
			return 1, nil
		}
		return 0, client.IgnoreNotFound(err)
	}
	var err error
	if l.Bundled, err = exists(types.NamespacedName{Name: cat.Bundles[0].BundledClusterRole}, &rbacv1.ClusterRole{}); err != nil {
		return l, err
	}
	rb := types.NamespacedName{Namespace: "kube-system", Name: olm.AuthReaderRoleBindingName(olm.ServiceName(cat.Bundles[0].WebhookDeployment))}
	l.AuthReader, err = exists(rb, &rbacv1.RoleBinding{})
	return l, err
}

// Uninstall deletes the Subscription and then the CSV, as a user uninstalling does.
func Uninstall(ctx context.Context, c client.Client, sub *v1alpha1.Subscription) error {
	csv := &v1alpha1.ClusterServiceVersion{}
	fresh := &v1alpha1.Subscription{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(sub), fresh); err != nil {
		return err
	}
	if err := c.Get(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: fresh.Status.InstalledCSV}, csv); err != nil {
		return fmt.Errorf("installed CSV %q: %w", fresh.Status.InstalledCSV, err)
	}
	if err := c.Delete(ctx, fresh); err != nil {
		return err
	}
	return c.Delete(ctx, csv)
}

// Replay3210 reproduces OLM issue #3210: a bundle is installed into first by OLM v0.25, whose
// unpack Job has no labels; after an upgrade to sim's version the same bundle is installed into
// second. It returns the error of the second install's namespace sync after three tries: nil when
// the plan was made, "jobs.batch ... already exists" when stuck.
func Replay3210(ctx context.Context, sim *olmsim.Sim, first, second string) error {
	old := sim.WithVersion(olmsim.V0_25)
	cat := &olmsim.Catalog{Name: "f4-" + first, Bundles: []olmsim.Bundle{{Package: "delta", Channel: "stable", CSVName: "delta.v1.0.0",
		Version: "1.0.0", Image: "registry.example/delta-bundle:" + first}}}
	if err := old.AddCatalog(ctx, cat); err != nil {
		return err
	}
	for _, ns := range []string{first, second} {
		if err := old.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	if _, err := old.CreateSubscription(ctx, first, "delta", cat, "delta", v1alpha1.ApprovalAutomatic); err != nil {
		return err
	}
	if _, err := old.Install(ctx, first, false); err != nil {
		return fmt.Errorf("installing with OLM v0.25: %w", err)
	}
	if _, err := sim.CreateSubscription(ctx, second, "delta", cat, "delta", v1alpha1.ApprovalAutomatic); err != nil {
		return err
	}
	// OLM requeues while a bundle unpacks; any other outcome gets three syncs. A Job controller
	// that just restarted (another test restarts kube-controller-manager) can take more than the
	// three seconds three syncs used to allow for the unpack.
	var err error
	deadline := time.Now().Add(testenv.Patience)
	for tries := 0; tries < 3; {
		var ip *v1alpha1.InstallPlan
		ip, err = sim.SyncNamespace(ctx, second)
		if errors.Is(err, olmsim.ErrUnpacking) && time.Now().Before(deadline) {
			time.Sleep(time.Second)
			continue
		}
		if err == nil && ip != nil {
			return nil
		}
		tries++
	}
	return err
}

// CatalogOutage is the outcome of failing the node of a catalog's serving pod.
type CatalogOutage struct {
	Node      string
	Recovered bool
	// NotReadyAfter is from the heartbeats stopping to the node turning NotReady.
	NotReadyAfter time.Duration
	// Recovery is from the node turning NotReady to a replacement pod Running elsewhere.
	Recovery time.Duration
}

// Total is from the heartbeats stopping to a replacement pod Running (zero if none).
func (o CatalogOutage) Total() time.Duration {
	if !o.Recovered {
		return 0
	}
	return o.NotReadyAfter + o.Recovery
}

// NodeFaults is what FailCatalogNode needs of a cluster: its client, and nodes whose heartbeats
// it can stop and restore (test/cluster's kwok cluster has them). An interface, so that the
// scenarios link no cluster harness and envtest tests may replay the others.
type NodeFaults interface {
	KubeClient() client.Client
	FailNode(ctx context.Context, name string) error
	RecoverNode(ctx context.Context, name string) error
	WaitNodeReady(ctx context.Context, name string, ready bool) error
}

// FailCatalogNode runs the F5 scenario on a kwok cluster: it stops the heartbeats of the node that
// runs cat's serving pod and waits up to waitFor, from the node turning NotReady, for a replacement
// pod Running on another node. cat must be served by a simulator whose catalog operator loop runs.
// The node is restored before returning.
func FailCatalogNode(ctx context.Context, c NodeFaults, cat *olmsim.Catalog, waitFor time.Duration) (CatalogOutage, error) {
	var out CatalogOutage
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pod, err := RunningCatalogPod(pctx, c.KubeClient(), cat, "")
	if err != nil {
		return out, fmt.Errorf("no running catalog pod: %w", err)
	}
	out.Node = pod.Spec.NodeName
	stopped := time.Now()
	if err := c.FailNode(ctx, out.Node); err != nil {
		return out, err
	}
	defer func() { _ = c.RecoverNode(context.Background(), out.Node) }()
	if err := c.WaitNodeReady(ctx, out.Node, false); err != nil {
		return out, fmt.Errorf("node %s never turned NotReady: %w", out.Node, err)
	}
	notReady := time.Now()
	out.NotReadyAfter = notReady.Sub(stopped)
	wctx, cancel := context.WithTimeout(ctx, waitFor)
	defer cancel()
	if p, err := RunningCatalogPod(wctx, c.KubeClient(), cat, out.Node); err == nil && p != nil {
		out.Recovered, out.Recovery = true, time.Since(notReady)
	}
	return out, nil
}

// RunningCatalogPod waits for a Running, not terminating catalog pod of cat on a node other than
// exclude ("" accepts any node).
func RunningCatalogPod(ctx context.Context, c client.Client, cat *olmsim.Catalog, exclude string) (*corev1.Pod, error) {
	var found *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(cat.Namespace), client.MatchingLabels{olm.CatalogSourceLabel: cat.Name}); err != nil {
			return false, nil
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.Spec.NodeName != exclude {
				found = p
				return true, nil
			}
		}
		return false, nil
	})
	return found, err
}
