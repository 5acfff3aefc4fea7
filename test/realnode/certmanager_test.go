package realnode

import (
	"bytes"
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/certmanager"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/node"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/testenv"
)

// testCertManagerOverlay installs olmguard as the README says for a cluster with cert-manager
// (kubectl apply -k of the cert-manager overlay), with cert-manager's own controllers and CA
// injector running beside the cluster: cert-manager issues the webhook's serving certificate,
// the webhook pods mount and serve it, and the apiserver, trusting the injected CA, calls the
// webhook through its Service. It ends with the README's uninstall of that overlay.
func testCertManagerOverlay(t *testing.T, c *cluster.Cluster, n *node.Node, kubectl string, sim *olmsim.Sim, cat *olmsim.Catalog) {
	certmanager.InstallCRDs(t, c.Client)
	certmanager.Run(t, c.Kubeconfig)
	t.Cleanup(func() {
		if t.Failed() {
			certmanager.LogState(t, c.Client, olmguard.DefaultNamespace)
		}
	})

	setFakeNodesSchedulable(t, c, n, false)
	start := time.Now()
	kubectlApply(t, c, kubectl, "manifests/overlays/cert-manager")
	waitAvailable(t, c)
	t.Logf("olmguard's pods Ready %s after kubectl apply -k manifests/overlays/cert-manager", time.Since(start).Round(100*time.Millisecond))
	setFakeNodesSchedulable(t, c, n, true)

	// The serving Secret is cert-manager's, and its CA is what the apiserver trusts for every
	// webhook.
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: olmguard.DefaultNamespace, Name: "olmguard-webhook-cert"}, secret); err != nil {
		t.Fatal(err)
	}
	if got := secret.Annotations["cert-manager.io/certificate-name"]; got != "olmguard-webhook" {
		t.Errorf("the serving Secret was not issued by cert-manager for Certificate olmguard-webhook (annotation %q)", got)
	}
	ca := bytes.TrimSpace(secret.Data["ca.crt"])
	testenv.Eventually(t, "cert-manager's CA injected into every webhook", func(ctx context.Context) (bool, error) {
		mwc := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, mwc); err != nil {
			return false, err
		}
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.ValidatingWebhookConfigurationName}, vwc); err != nil {
			return false, err
		}
		var bundles [][]byte
		for _, w := range mwc.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, w := range vwc.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
		for _, b := range bundles {
			if len(ca) == 0 || !bytes.Contains(b, ca) {
				return false, nil
			}
		}
		return len(bundles) > 0, nil
	})

	// The webhook in its pods, with cert-manager's certificate, answers the apiserver: each plan
	// comes back from its create with the owner OLM's race left out (the webhook's failure policy
	// is Ignore, so a TLS failure would show as a plan without it).
	checkReplays3199(t, sim, cat, "realnode-cm-f1", "with the cert-manager overlay installed")

	checkUninstall(t, c, kubectl, "manifests/overlays/cert-manager")
}
