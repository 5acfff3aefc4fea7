// Package mutate holds the pure decisions of olmguard's mutating webhooks: given what the
// apiserver sent and what olmguard looked up, which JSON patch operations to return. Patches only
// append or fill in; they never remove or change a value OLM set (see DESIGN.md, safety rules).
//
// F1's guarantee (docs/f1-guarantee.md): an InstallPlan CREATE the webhook answers with its default
// read is owned by every Subscription committed before the webhook's Subscription List began and
// not being deleted, whichever and however many kube-apiservers serve the cluster, because that List
// is consistent (admit.LiveSubscriptions). When the webhook is away, its lookup fails, or it reads the
// watch cache (--consistent-subscription-reads=false), the controller's installplan-owners
// reconciler adds what is missing once OLM points the Subscription at the plan.
package mutate
