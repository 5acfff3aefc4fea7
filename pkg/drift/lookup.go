package drift

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// ReferencedPlan reads the InstallPlan a Subscription's status.installPlanRef names, by name as
// OLM's lister does: nil when the Subscription references none or the plan does not exist. It is
// the one lookup Compare needs; the reconciler, doctor and tests share it.
func ReferencedPlan(ctx context.Context, r client.Reader, sub *v1alpha1.Subscription) (*v1alpha1.InstallPlan, error) {
	ref := sub.Status.InstallPlanRef
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	plan := &v1alpha1.InstallPlan{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: sub.Namespace, Name: ref.Name}, plan); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return plan, nil
}
