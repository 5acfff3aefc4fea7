package doctor

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/kubectlcmd"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
)

// WebhookNotCalledCheck names the finding of a webhook the kube-apiserver does not call.
const WebhookNotCalledCheck = "WebhookNotCalled"

// ProbeWebhook runs the reachability probe the controller's webhook-probe reconciler runs
// (pkg/webhookprobe): a server-side dry run (dryRun=All: nothing is stored) of the creation of the
// probe ConfigMap in olmguard's namespace, which olmguard's webhook must mutate. It writes
// nothing, but the kube-apiserver asks for the create permission on ConfigMaps in namespace for a
// dry run too; without it the probe is skipped. It adds its finding, or its skip, to r.
func ProbeWebhook(ctx context.Context, c client.Writer, namespace string, r *Report) {
	nonce := webhookprobe.Nonce()
	obj := webhookprobe.Object(namespace, nonce)
	err := c.Create(ctx, obj, client.DryRunAll, client.FieldOwner(olmguard.FieldManager))
	findings, skipped := WebhookProbeFindings(namespace, webhookprobe.Judge(nonce, obj.GetAnnotations(), err), err)
	r.Findings = append(r.Findings, findings...)
	Sort(r.Findings)
	r.Skipped = append(r.Skipped, skipped...)
	if r.Checked == nil {
		r.Checked = map[string]int{}
	}
	if len(skipped) == 0 {
		r.Checked["WebhookProbe"]++
	}
}

// WebhookProbeFindings turns a probe's result into doctor's answer: nothing when the webhook was
// called; a skipped check when doctor may not dry-run the probe or olmguard's namespace does not
// exist (olmguard is not installed there); else a WebhookNotCalled finding with the fix.
func WebhookProbeFindings(namespace string, res webhookprobe.Result, err error) (findings []Finding, skipped []string) {
	switch {
	case res.OK():
		return nil, nil
	case apierrors.IsForbidden(err):
		return nil, []string{fmt.Sprintf("webhook probe: cannot dry-run create a ConfigMap in %s (a dry run needs create on configmaps there): %v", namespace, err)}
	case apierrors.IsNotFound(err):
		return nil, []string{fmt.Sprintf("webhook probe: namespace %s not found (olmguard is not installed there; --olmguard-namespace): %v", namespace, err)}
	}
	f := Finding{Class: Webhook, Kind: "MutatingWebhookConfiguration", Name: olmguard.MutatingWebhookConfigurationName, Check: WebhookNotCalledCheck,
		Problem:  "the kube-apiserver does not call olmguard's webhook: every webhook fails open, so OLM's writes pass without olmguard's corrections and policies",
		Evidence: res.Message,
		Fix: "make the webhook reachable from the kube-apiserver: the Service olmguard-webhook must have ready endpoints on the port the configuration names, " +
			"its caBundle must be the serving certificate's CA, no NetworkPolicy may block the webhook port, " +
			"GKE private clusters need a firewall rule for the webhook port (9443) from the control plane, EKS with a custom CNI needs hostNetwork " +
			"(docs/alerts.md#olmguardwebhooknotcalled)"}
	return []Finding{withCommands(f,
		kubectl(namespace, "get", "endpointslices").Selector("kubernetes.io/service-name", olmguard.WebhookServiceName),
		kubectl(namespace, "get", "networkpolicies"),
		kubectlcmd.New("get", "mutatingwebhookconfiguration", olmguard.MutatingWebhookConfigurationName, "-o", "yaml"),
	)}, nil
}
