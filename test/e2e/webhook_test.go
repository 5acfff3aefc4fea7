package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/scenario"
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
// one Subscription comes back owned by it.
func waitWebhookActive(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	ns := "olmguard-probe"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	sub := scenario.Subscription(ns, "probe", "probe", v1alpha1.ApprovalAutomatic)
	if err := c.Client.Create(ctx, sub); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(sub), sub); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: ns},
			Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"probe"}, Approval: v1alpha1.ApprovalManual}}
		if err := c.Client.Create(ctx, ip, client.DryRunAll); err != nil {
			return false, err
		}
		return scenario.OwnedBy(ip, sub.UID), nil
	})
	if err != nil {
		t.Fatalf("the apiserver never called olmguard's webhook: %v", err)
	}
}
