package setup

import (
	"context"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/admit/registration"
	"github.com/olmguard/olmguard/pkg/mutate"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/validate"
)

// Admission is olmguard's admission side, declared once: every path, the webhook configuration
// entry the apiserver calls it through, and its handler. The server serves it, the generated
// manifests and --register-url register it, and the tests walk it. Lookups read the apiserver
// live (mgr.GetAPIReader): a Subscription created milliseconds before a plan must be seen.
// Subscriptions' spec and status come from a cache of trimmed views when the consistent
// metadata list shows the cache holds them at their current resourceVersion
// (admit.LiveSubscriptions.Cache); the others are read one at a time.
func (w Webhook) Admission() []admit.Endpoint {
	create, update := admissionregistrationv1.Create, admissionregistrationv1.Update
	subscriptions := func(mgr manager.Manager, webhook string) (admit.LiveSubscriptions, error) {
		// Registers the Subscription informer before the manager starts, so readiness waits
		// for its first list (the webhook's ReadyCheck waits for the cache).
		if _, err := mgr.GetCache().GetInformer(context.Background(), &v1alpha1.Subscription{}, cache.BlockUntilSynced(false)); err != nil {
			return admit.LiveSubscriptions{}, fmt.Errorf("watching Subscriptions: %w", err)
		}
		return admit.LiveSubscriptions{Reader: mgr.GetAPIReader(), Cache: mgr.GetCache(), WatchCache: !w.ConsistentSubscriptionReads, Webhook: webhook}, nil
	}
	return []admit.Endpoint{
		{ // F1: merge live Subscriptions' ownerReferences into InstallPlans.
			Webhook: registration.Webhook{Name: "installplans.mutate.olmguard.io", Path: olmguard.MutateInstallPlansPath, Mutating: true,
				Rules: registration.OLMRule("installplans", create, update)},
			Handler: func(mgr manager.Manager) (admit.Decider, error) {
				subs, err := subscriptions(mgr, mutate.InstallPlansWebhook)
				return &mutate.InstallPlanHandler{Subscriptions: subs}, err
			},
		},
		{ // F3: add the cleanup finalizer to CSVs that lack it; copies own nothing.
			Webhook: registration.Webhook{Name: "clusterserviceversions.mutate.olmguard.io", Path: olmguard.MutateClusterServiceVersionsPath, Mutating: true,
				Rules:           registration.OLMRule("clusterserviceversions", create, update),
				MatchConditions: registration.WithoutCleanupFinalizer()},
			Handler: admit.Static(mutate.CSVHandler{}),
		},
		{ // F4: rename OLM's bundle unpack Jobs; only those OLM (>= v0.26) finds by label.
			Webhook: registration.Webhook{Name: "jobs.mutate.olmguard.io", Path: olmguard.MutateJobsPath, Mutating: true,
				Rules: registration.JobCreates(), ObjectSelector: registration.UnpackJobLabels()},
			Handler: func(mgr manager.Manager) (admit.Decider, error) {
				return &mutate.JobHandler{TTL: w.UnpackJobTTL, Catalogs: admit.LiveCatalogNamespaces{Reader: mgr.GetAPIReader()}}, nil
			},
		},
		{ // OLM #3607: keep what a user put on an operator's ServiceAccount when OLM's plan step
			// rewrites it (every upgrade). Only OLM's updates are sent (a match condition on the
			// requester; no object selector: OLM's own label is what its write may change).
			Webhook: registration.Webhook{Name: "serviceaccounts.mutate.olmguard.io", Path: olmguard.MutateServiceAccountsPath, Mutating: true,
				Rules: registration.ServiceAccountUpdates(), MatchConditions: registration.ByOLMServiceAccount()},
			Handler: admit.Static(&mutate.ServiceAccountHandler{OLMUsers: w.OLMUsers, Disabled: !w.RestoreServiceAccountMetadata}),
		},
		{ // The reachability probe (pkg/webhookprobe): the dry-run ConfigMaps the controller and doctor
			// create in olmguard's own namespace, and nothing else, are answered with a mark that
			// shows the kube-apiserver called the webhook.
			Webhook: registration.Webhook{Name: "webhook-probe.mutate.olmguard.io", Path: olmguard.MutateWebhookProbePath, Mutating: true,
				Rules: registration.WebhookProbeCreates(), ObjectSelector: registration.WebhookProbeLabels(),
				MatchConditions: registration.DryRunOnly(), OwnNamespace: true},
			Handler: admit.Static(mutate.WebhookProbeHandler{Namespace: w.Namespace}),
		},
		{ // Duplicate packages and mixed approval in a namespace; a create where no OperatorGroup is; an untrusted catalog.
			Webhook: registration.Webhook{Name: "subscriptions.validate.olmguard.io", Path: olmguard.ValidateSubscriptionsPath,
				Rules: registration.OLMRule("subscriptions", create, update)},
			Handler: func(mgr manager.Manager) (admit.Decider, error) {
				subs, err := subscriptions(mgr, validate.SubscriptionsWebhook)
				return &validate.SubscriptionHandler{Subscriptions: subs,
					OperatorGroups: admit.LiveOperatorGroups{Reader: mgr.GetAPIReader()},
					CatalogSources: admit.LiveCatalogSources{Reader: mgr.GetAPIReader()}, Trusted: w.TrustedCatalogs, Policies: w.Policies}, err
			},
		},
		{ // Catalog trust (OLM #3820): who may serve operators.
			Webhook: registration.Webhook{Name: "catalogsources.validate.olmguard.io", Path: olmguard.ValidateCatalogSourcesPath,
				Rules: registration.OLMRule("catalogsources", create, update)},
			Handler: admit.Static(&validate.CatalogSourceHandler{Trusted: w.TrustedCatalogs, Policies: w.Policies}),
		},
		{ // The OperatorGroup guard: a second OperatorGroup in a namespace, missing target namespaces.
			Webhook: registration.Webhook{Name: "operatorgroups.validate.olmguard.io", Path: olmguard.ValidateOperatorGroupsPath,
				Rules: registration.OperatorGroupRule(create, update)},
			Handler: func(mgr manager.Manager) (admit.Decider, error) {
				return &validate.OperatorGroupHandler{OperatorGroups: admit.LiveOperatorGroups{Reader: mgr.GetAPIReader()},
					Namespaces: admit.LiveNamespaces{Reader: mgr.GetAPIReader()}, Policies: w.Policies}, nil
			},
		},
		{ // An InstallPlan update must keep live Subscriptions' ownerReferences.
			Webhook: registration.Webhook{Name: "installplans.validate.olmguard.io", Path: olmguard.ValidateInstallPlansPath,
				Rules: registration.OLMRule("installplans", update)},
			Handler: func(mgr manager.Manager) (admit.Decider, error) {
				subs, err := subscriptions(mgr, validate.InstallPlansWebhook)
				return &validate.InstallPlanHandler{Subscriptions: subs, Policies: w.Policies}, err
			},
		},
		{ // Only updates that remove olmguard's finalizer. No object selector on olm.copiedFrom:
			// copies never carry the finalizer, so none is sent, and a selector would let anyone who
			// labels a guarded CSV olm.copiedFrom (a label OLM sets only when it creates a copy)
			// remove the finalizer unseen in the next update: both objects would carry the label.
			Webhook: registration.Webhook{Name: "clusterserviceversions.validate.olmguard.io", Path: olmguard.ValidateClusterServiceVersionsPath,
				Rules: registration.OLMRule("clusterserviceversions", update), MatchConditions: registration.CleanupFinalizerRemoved()},
			Handler: admit.Static(&validate.CSVHandler{Policies: w.Policies, CleanupUsers: w.CleanupUsers}),
		},
		{ // The replaces-cycle guard (OCPBUGS-23954): a CSV created, or given a new spec.replaces, whose
			// replaces chain through its namespace's CSVs comes back to it. Only such writes are sent.
			Webhook: registration.Webhook{Name: "clusterserviceversions-replaces.validate.olmguard.io", Path: olmguard.ValidateCSVReplacesPath,
				Rules: registration.OLMRule("clusterserviceversions", create, update), MatchConditions: registration.ReplacesWritten()},
			Handler: func(mgr manager.Manager) (admit.Decider, error) {
				return &validate.CSVReplacesHandler{CSVs: admit.LiveCSVReplaces{Reader: mgr.GetAPIReader()}, Policies: w.Policies}, nil
			},
		},
	}
}
