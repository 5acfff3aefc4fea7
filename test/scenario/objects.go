package scenario

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Subscription is an unresolvable Subscription to package pkg: its catalog does not exist, so
// neither OLM nor the simulator installs anything for it. Tests of admission and of the
// reconcilers write it and the plans that name it themselves.
func Subscription(ns, name, pkg string, approval v1alpha1.Approval) *v1alpha1.Subscription {
	return &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SubscriptionSpec{CatalogSource: "none", CatalogSourceNamespace: ns, Package: pkg, InstallPlanApproval: approval}}
}

// InstallPlan is an approved, automatic plan in ns with a generated name, as OLM writes one
// before its first status.
func InstallPlan(ns string) *v1alpha1.InstallPlan {
	return &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{GenerateName: "install-", Namespace: ns},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"x.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true, Generation: 1}}
}
