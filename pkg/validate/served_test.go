package validate

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
	case *SubscriptionHandler:
		rules = registration.OLMRule("subscriptions", create, update)
	case *CatalogSourceHandler:
		rules = registration.OLMRule("catalogsources", create, update)
	case *OperatorGroupHandler:
		rules = registration.OperatorGroupRule(create, update)
	case *InstallPlanHandler:
		rules = registration.OLMRule("installplans", update)
	case *CSVReplacesHandler:
		rules = registration.OLMRule("clusterserviceversions", create, update)
	case *CSVHandler:
		rules = registration.OLMRule("clusterserviceversions", update)
	default:
		panic(fmt.Sprintf("no endpoint serves %T", d))
	}
	h, err := d.For(rules)
	if err != nil {
		panic(err)
	}
	return h
}
