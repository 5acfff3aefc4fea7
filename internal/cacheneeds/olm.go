package cacheneeds

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// InstallPlanView is the field set of the reconcilers that read InstallPlans from the cache
// (installplan-owners, subscription-drift): the typed view without each step's manifest. Plans of
// OLM before bundle unpacking carry whole manifests there, and neither reconciler reads them
// (the cleanup reads plans' steps live: csvcleanup.planCRDs).
var InstallPlanView = Fields{Name: "InstallPlan typed view without step manifests", Trim: trimInstallPlan}

func trimInstallPlan(obj client.Object) client.Object {
	ip, ok := obj.(*v1alpha1.InstallPlan)
	if !ok {
		return obj
	}
	for _, st := range ip.Status.Plan {
		if st != nil {
			st.Resource.Manifest = ""
		}
	}
	return ip
}
