package drift

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// PlanKey names the InstallPlan a Subscription's status.installPlanRef references, by name in the
// Subscription's namespace as OLM's lister finds it; false when it references none. The plan read
// under that key (nil when it does not exist) is the one Compare needs: the reconciler, doctor
// and the tests read it so.
func PlanKey(sub *v1alpha1.Subscription) (types.NamespacedName, bool) {
	ref := sub.Status.InstallPlanRef
	if ref == nil || ref.Name == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: sub.Namespace, Name: ref.Name}, true
}
