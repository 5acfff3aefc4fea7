// Package setup assembles what olmguard runs: the admission table (every path, its webhook
// configuration entry and its handler) and the controller's reconcilers with their options. It
// is the only package that imports the reconcilers. The binaries, the end-to-end tests and the
// demo all use it, so they run the same olmguard.
package setup

import (
	"flag"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/internal/flags"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/controller/catalogpods"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/controller/installplans"
	"github.com/olmguard/olmguard/pkg/controller/olmaudit"
	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/controller/unpackjobs"
	"github.com/olmguard/olmguard/pkg/validate"
)

// Webhook is the configuration of olmguard's admission handlers.
type Webhook struct {
	Policies validate.Policies
	// UnpackJobTTL is given to unpack Jobs OLM creates without one.
	UnpackJobTTL time.Duration
	// CleanupUsers may remove olmguard.io/cleanup while a cleanup is pending.
	CleanupUsers []string
	// ConsistentSubscriptionReads makes the handlers list Subscriptions with a consistent read
	// (the default, which F1's guarantee rests on); false reads the apiserver's watch cache
	// (admit.LiveSubscriptions).
	ConsistentSubscriptionReads bool
	// TrustedCatalogs are the catalogs --policy-catalog-trust trusts.
	TrustedCatalogs validate.TrustedCatalogs
}

// DefaultWebhook returns the flag defaults.
func DefaultWebhook() Webhook {
	return Webhook{Policies: validate.DefaultPolicies(), UnpackJobTTL: 10 * time.Minute, CleanupUsers: validate.DefaultCleanupUsers, ConsistentSubscriptionReads: true,
		TrustedCatalogs: validate.DefaultTrustedCatalogs()}
}

// BindFlags registers the policy flags, the trusted catalogs and --unpack-job-ttl.
func (w *Webhook) BindFlags(fs *flag.FlagSet) {
	w.Policies.BindFlags(fs)
	w.TrustedCatalogs.BindFlags(fs)
	fs.DurationVar(&w.UnpackJobTTL, "unpack-job-ttl", w.UnpackJobTTL, "ttlSecondsAfterFinished given to bundle unpack Jobs OLM creates without one (0 leaves them as they are)")
	fs.Var(flags.List{Items: &w.CleanupUsers, Required: "at least one user is required"}, "cleanup-finalizer-users", "comma-separated users allowed to remove olmguard.io/cleanup during a cleanup: the controller's identity")
	fs.BoolVar(&w.ConsistentSubscriptionReads, "consistent-subscription-reads", w.ConsistentSubscriptionReads, "list Subscriptions (an InstallPlan's owners, the Subscription and InstallPlan policies) with a consistent read, which finds every Subscription committed before the request on any apiserver; false reads the serving apiserver's watch cache, which is cheaper under bursts of plans but can miss a Subscription created a moment before (the controller then repairs the plan)")
}

// Controller is the configuration of the controller's reconcilers: each concern's own options.
// The manager's settings are controller.Options.
type Controller struct {
	SubscriptionDrift subscriptiondrift.Options
	CSVCleanup        csvcleanup.Options
	UnpackJobs        unpackjobs.Options
	CatalogPods       catalogpods.Options
	OLMAudit          olmaudit.Options
}

// DefaultController returns the flag defaults.
func DefaultController() Controller {
	return Controller{SubscriptionDrift: subscriptiondrift.DefaultOptions(), CSVCleanup: csvcleanup.DefaultOptions(),
		UnpackJobs: unpackjobs.DefaultOptions(), CatalogPods: catalogpods.DefaultOptions(), OLMAudit: olmaudit.DefaultOptions()}
}

// BindFlags registers every reconciler's flags.
func (c *Controller) BindFlags(fs *flag.FlagSet) {
	c.CatalogPods.BindFlags(fs)
	c.CSVCleanup.BindFlags(fs)
	c.SubscriptionDrift.BindFlags(fs)
	c.UnpackJobs.BindFlags(fs)
	c.OLMAudit.BindFlags(fs)
}

// Validate reports the first invalid reconciler option.
func (c Controller) Validate() error {
	for _, err := range []error{c.CatalogPods.Validate(), c.CSVCleanup.Validate(), c.SubscriptionDrift.Validate(), c.UnpackJobs.Validate(), c.OLMAudit.Validate()} {
		if err != nil {
			return err
		}
	}
	return nil
}

// Reconcilers returns every reconciler of the controller, in the order they are added.
func (c Controller) Reconcilers() []controller.Setup {
	return []controller.Setup{InstallPlanOwners(), SubscriptionDrift(c.SubscriptionDrift), CSVCleanup(c.CSVCleanup),
		UnpackJobs(c.UnpackJobs), CatalogPods(c.CatalogPods), OLMAudit(c.OLMAudit)}
}

// InstallPlanOwners repairs plans written while the webhook was away (F1).
func InstallPlanOwners() controller.Setup {
	return controller.Setup{Name: installplans.Name, Cache: installplans.CacheNeeds(), Add: installplans.Add}
}

// SubscriptionDrift reports and nudges Subscriptions out of step with their plan (F2).
func SubscriptionDrift(o subscriptiondrift.Options) controller.Setup {
	return controller.Setup{Name: subscriptiondrift.Name, Cache: subscriptiondrift.CacheNeeds(), Add: func(mgr manager.Manager) error { return subscriptiondrift.Add(mgr, o) }}
}

// CSVCleanup runs the CSV cleanup finalizer (F3).
func CSVCleanup(o csvcleanup.Options) controller.Setup {
	return controller.Setup{Name: csvcleanup.Name, Cache: csvcleanup.CacheNeeds(), Add: func(mgr manager.Manager) error { return csvcleanup.Add(mgr, o) }}
}

// UnpackJobs keeps OLM's unpack Jobs visible and tidy (F4).
func UnpackJobs(o unpackjobs.Options) controller.Setup {
	return controller.Setup{Name: unpackjobs.Name, Cache: unpackjobs.CacheNeeds(), Add: func(mgr manager.Manager) error { return unpackjobs.Add(mgr, o) }}
}

// CatalogPods recovers catalog pods stranded on lost nodes (F5).
func CatalogPods(o catalogpods.Options) controller.Setup {
	return controller.Setup{Name: catalogpods.Name, Cache: catalogpods.CacheNeeds(), Add: func(mgr manager.Manager) error { return catalogpods.Add(mgr, o) }}
}

// OLMAudit runs doctor's checks every interval and exports their findings as metrics, so that
// the failures olmguard cannot heal alone can be alerted on.
func OLMAudit(o olmaudit.Options) controller.Setup {
	return controller.Setup{Name: olmaudit.Name, Cache: olmaudit.CacheNeeds(), Add: func(mgr manager.Manager) error { return olmaudit.Add(mgr, o) }}
}
