package e2e

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/install"
	"github.com/olmguard/olmguard/test/testenv"
)

// The webhook registered with --register-url receives AdmissionReviews from the cluster's
// apiserver and answers them (the answer is visible: the plan comes back patched).
func TestWebhookRegisteredOutOfClusterAnswersTheAPIServer(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.Patience)
	defer cancel()
	startWebhook(t, c)
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, m); err != nil {
		t.Fatalf("webhook did not register its configuration: %v", err)
	}
	for _, w := range m.Webhooks {
		if w.ClientConfig.URL == nil || !strings.HasPrefix(*w.ClientConfig.URL, "https://127.0.0.1:") || len(w.ClientConfig.CABundle) == 0 {
			t.Errorf("webhook %s: clientConfig %+v, want the register URL and a CA bundle", w.Name, w.ClientConfig)
		}
	}
	waitWebhookActive(t, ctx, c)
}

// waitWebhookActive waits until the apiserver calls the webhook: a dry-run plan in a namespace with
// one Subscription comes back owned by it (install.WaitWebhookActive).
func waitWebhookActive(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	install.WaitWebhookActive(t, ctx, c)
}
