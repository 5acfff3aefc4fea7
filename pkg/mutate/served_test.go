package mutate

import (
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
)

// served is d as the server serves it: bound to the rules of its endpoint in pkg/setup's
// admission table (TestBuildPerWebhook there pins them).
func served(d admit.Decider) admission.Handler {
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	var rules []admissionregistrationv1.RuleWithOperations
	switch d.(type) {
	case *InstallPlanHandler:
		rules = registration.OLMRule("installplans", create, update)
	case CSVHandler:
		rules = registration.OLMRule("clusterserviceversions", create, update)
	case *JobHandler:
		rules = registration.JobCreates()
	case *ServiceAccountHandler:
		rules = registration.ServiceAccountUpdates()
	case WebhookProbeHandler:
		rules = registration.WebhookProbeCreates()
	default:
		panic(fmt.Sprintf("no endpoint serves %T", d))
	}
	h, err := d.For(rules)
	if err != nil {
		panic(err)
	}
	return h
}
