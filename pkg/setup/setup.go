// Package setup assembles what olmguard runs: the admission table (every path, its webhook
// configuration entry and its handler) and the controller's reconcilers with their options. It
// is the only package that imports the reconcilers. The binaries, the end-to-end tests and the
// demo all use it, so they run the same olmguard.
package setup

import (
	"flag"
	"time"

	"github.com/olmguard/olmguard/internal/flags"

	"github.com/olmguard/olmguard/pkg/controller/catalogpods"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/controller/olmaudit"
	"github.com/olmguard/olmguard/pkg/controller/reachability"
	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/controller/unpackjobs"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/serviceaccounts"
	"github.com/olmguard/olmguard/pkg/validate"
)

// Webhook is the configuration of olmguard's admission handlers.
type Webhook struct {
	Policies validate.Policies
	// UnpackJobTTL is given to unpack Jobs OLM creates without one (--unpack-job-default-ttl).
	UnpackJobTTL time.Duration
	// CleanupUsers may remove olmguard.io/cleanup while a cleanup is pending.
	CleanupUsers []string
	// ConsistentSubscriptionReads makes the handlers list Subscriptions with a consistent read
	// (the default, which F1's guarantee rests on); false reads the apiserver's watch cache
	// (admit.LiveSubscriptions).
	ConsistentSubscriptionReads bool
	// TrustedCatalogs are the catalogs --policy-catalog-trust trusts.
	TrustedCatalogs validate.TrustedCatalogs
	// RestoreServiceAccountMetadata keeps what OLM's ServiceAccount step drops from an operator's
	// ServiceAccount (OLM #3607; --restore-serviceaccount-metadata).
	RestoreServiceAccountMetadata bool
	// OLMUsers are OLM's identities, the only requesters whose ServiceAccount updates are
	// corrected (--olm-users).
	OLMUsers []string
	// Namespace is olmguard's (the webhook's --namespace, set by the binary): the only namespace
	// whose reachability probes the webhook answers.
	Namespace string
}

// DefaultWebhook returns the flag defaults.
func DefaultWebhook() Webhook {
	return Webhook{Policies: validate.DefaultPolicies(), UnpackJobTTL: 10 * time.Minute, CleanupUsers: validate.DefaultCleanupUsers, ConsistentSubscriptionReads: true,
		TrustedCatalogs: validate.DefaultTrustedCatalogs(), RestoreServiceAccountMetadata: true, OLMUsers: serviceaccounts.DefaultOLMUsers(), Namespace: olmguard.DefaultNamespace}
}

// BindFlags registers the policy flags, the trusted catalogs and --unpack-job-default-ttl.
func (w *Webhook) BindFlags(fs *flag.FlagSet) {
	w.Policies.BindFlags(fs)
	w.TrustedCatalogs.BindFlags(fs)
	fs.DurationVar(&w.UnpackJobTTL, "unpack-job-default-ttl", w.UnpackJobTTL, "ttlSecondsAfterFinished given to bundle unpack Jobs OLM creates without one (0 leaves them as they are)")
	// The former name, which the controller used too for another setting (--unpack-job-retention).
	flags.Alias(fs, "unpack-job-default-ttl", "unpack-job-ttl")
	fs.Var(flags.List{Items: &w.CleanupUsers, Required: "at least one user is required"}, "cleanup-finalizer-users", "comma-separated users allowed to remove olmguard.io/cleanup during a cleanup: the controller's identity")
	fs.BoolVar(&w.RestoreServiceAccountMetadata, "restore-serviceaccount-metadata", w.RestoreServiceAccountMetadata, "when OLM's InstallPlan step rewrites an operator's ServiceAccount (every upgrade), put back the annotations, labels, imagePullSecrets and automountServiceAccountToken it dropped (OLM #3607)")
	fs.Var(flags.List{Items: &w.OLMUsers, Required: "at least one user is required"}, "olm-users", "comma-separated user names of OLM's olm-operator and catalog-operator: only their ServiceAccount updates are corrected")
	fs.BoolVar(&w.ConsistentSubscriptionReads, "consistent-subscription-reads", w.ConsistentSubscriptionReads, "list Subscriptions (an InstallPlan's owners, the Subscription and InstallPlan policies) with a consistent read, which finds every Subscription committed before the request on any apiserver; false reads the serving apiserver's watch cache, which is cheaper under bursts of plans but can miss a Subscription created a moment before (the controller then repairs the plan)")
}

// Controller is the configuration of the controller's reconcilers: each concern's own options,
// one field per reconciler with options in the registry (registry.go). The manager's settings are
// controller.Options.
type Controller struct {
	SubscriptionDrift subscriptiondrift.Options
	CSVCleanup        csvcleanup.Options
	UnpackJobs        unpackjobs.Options
	CatalogPods       catalogpods.Options
	OLMAudit          olmaudit.Options
	WebhookProbe      reachability.Options
}
