// Package install installs olmguard on a test cluster as the README says: the manifests' RBAC for
// real, the webhook configurations, and both binaries run out of cluster as olmguard's
// ServiceAccounts (through impersonation), so the manifests' RBAC is all they have. The e2e and
// hostile-tenant tiers use it.
package install

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// ServerSideApply applies obj with server-side apply and strict field validation, for real or as
// a dry run (admission and validation run in full, nothing is stored).
func ServerSideApply(ctx context.Context, c client.Client, obj *unstructured.Unstructured, dryRun bool) error {
	obj = obj.DeepCopy()
	obj.SetManagedFields(nil)
	opts := []client.PatchOption{client.FieldOwner("olmguard-e2e"), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	// Strict: the apiserver rejects unknown and duplicate fields instead of dropping them.
	//nolint:staticcheck // server-side apply as kubectl does it; Client.Apply takes no field validation
	return c.Patch(ctx, obj, client.Apply, append(opts, client.FieldValidation("Strict"))...)
}

// IsRBAC reports whether an object is part of olmguard's identities and permissions, which the
// tests apply for real (everything else is validated with a dry run: a Deployment of the real
// image cannot run on kwok's fake nodes, and webhook configurations pointing at it would slow
// every other test).
func IsRBAC(o *unstructured.Unstructured) bool {
	switch o.GetKind() {
	case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
		return true
	}
	return false
}

// ApplyRBAC applies the RBAC of the rendered objects for real (the self-signed overlay's is a
// superset of the cert-manager one's) and removes it at test cleanup.
func ApplyRBAC(t *testing.T, ctx context.Context, c *cluster.Cluster, objs []*unstructured.Unstructured) {
	t.Helper()
	for _, o := range objs {
		if !IsRBAC(o) {
			continue
		}
		if err := ServerSideApply(ctx, c.Client, o, false); err != nil {
			t.Fatalf("applying %s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if o.GetKind() != "Namespace" && o.GetKind() != "ServiceAccount" {
			t.Cleanup(func() { _ = c.Client.Delete(context.Background(), o) })
		}
	}
}

// ServiceAccountKubeconfig writes a kubeconfig that acts as olmguard's ServiceAccount sa through
// impersonation.
func ServiceAccountKubeconfig(t *testing.T, c *cluster.Cluster, sa string) string {
	t.Helper()
	return ImpersonatingKubeconfig(t, c, olmguard.DefaultNamespace, sa)
}

// ImpersonatingKubeconfig writes a kubeconfig that acts as ServiceAccount ns/sa through
// impersonation of the cluster admin's kubeconfig.
func ImpersonatingKubeconfig(t *testing.T, c *cluster.Cluster, ns, sa string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	user := "system:serviceaccount:" + ns + ":" + sa
	for _, a := range cfg.AuthInfos {
		a.Impersonate = user
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}
	}
	path := filepath.Join(t.TempDir(), ns+"-"+sa+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Options choose how StartAsServiceAccounts runs the binaries.
type Options struct {
	WebhookArgs    []string // beside --kubeconfig, --self-signed, --extra-sans and --port
	ControllerArgs []string // beside --kubeconfig
}

// Olmguard is olmguard's two processes started by StartAsServiceAccounts.
type Olmguard struct {
	Webhook, Controller *procs.Process
	// WebhookAddress is host:port of the webhook's HTTPS server (the Service's stand-in).
	WebhookAddress string
}

// StartAsServiceAccounts runs the webhook and the controller as olmguard's ServiceAccounts,
// through impersonation: the manifests' RBAC (ApplyRBAC) is all they have. The webhook
// configurations exist before the webhook starts, as the manifests create them; the URL stands in
// for the Service. Both stop, and the configurations go, at test cleanup.
func StartAsServiceAccounts(t *testing.T, ctx context.Context, c *cluster.Cluster, o Options) Olmguard {
	t.Helper()
	testenv.Eventually(t, "the aggregated controller ClusterRole filled in", func(ctx context.Context) (bool, error) {
		cr := &rbacv1.ClusterRole{}
		err := c.Client.Get(ctx, types.NamespacedName{Name: "olmguard-controller"}, cr)
		return len(cr.Rules) > 0, err
	})
	bin := procs.Binaries(t)
	port, err := procs.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	if err := registration.Apply(ctx, c.Client, registration.Options{Namespace: olmguard.DefaultNamespace,
		URL: "https://" + addr, TimeoutSeconds: registration.DefaultTimeoutSeconds}, admit.Webhooks(setup.DefaultWebhook().Admission())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := procs.RemoveWebhookConfigurations(context.Background(), c.Client); err != nil {
			t.Error(err)
		}
	})
	// A Secret left by another test's webhook would carry other SANs; the webhook re-issues it.
	args := append([]string{"--kubeconfig=" + ServiceAccountKubeconfig(t, c, "olmguard-webhook"), "--self-signed",
		"--extra-sans=127.0.0.1", fmt.Sprintf("--port=%d", port)}, o.WebhookArgs...)
	p, err := procs.Start(bin, "webhook", args...)
	webhook := procs.Track(t, p, err)
	WaitWebhookActive(t, ctx, c)
	p, err = procs.StartController(bin, ServiceAccountKubeconfig(t, c, "olmguard-controller"), o.ControllerArgs...)
	return Olmguard{Webhook: webhook, Controller: procs.Track(t, p, err), WebhookAddress: addr}
}

// ProbeNamespace is where WaitWebhookActive asks for the webhook's admission.
const ProbeNamespace = "olmguard-probe"

// WaitWebhookActive waits until the apiserver calls the webhook: a dry-run plan in a namespace with
// one Subscription must come back owned by it (F1).
func WaitWebhookActive(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	if err := WebhookActive(ctx, c, testenv.Patience); err != nil {
		t.Fatal(err)
	}
}

// WebhookActive is WaitWebhookActive returning an error: the apiserver did not call the webhook
// within patience.
func WebhookActive(ctx context.Context, c *cluster.Cluster, patience time.Duration) error {
	ns := ProbeNamespace
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return err
	}
	sub := builders.Subscription(ns, "probe", "probe", v1alpha1.ApprovalAutomatic)
	if err := c.Client.Create(ctx, sub); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sub), sub); err != nil {
		return err
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, patience, true, func(ctx context.Context) (bool, error) {
		ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns},
			Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"probe"}, Approval: v1alpha1.ApprovalManual}}
		if err := c.Client.Create(ctx, ip, client.DryRunAll); err != nil {
			return false, err
		}
		return scenario.OwnedBy(ip, sub.UID), nil
	})
	if err != nil {
		return fmt.Errorf("the apiserver never called olmguard's webhook: %w", err)
	}
	return nil
}
