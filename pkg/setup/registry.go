package setup

import (
	"errors"
	"flag"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/controller/catalogpods"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/controller/installplans"
	"github.com/olmguard/olmguard/pkg/controller/olmaudit"
	"github.com/olmguard/olmguard/pkg/controller/reachability"
	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/controller/unpackjobs"
)

// reconcilers is the controller's registry: every reconciler once, in the order the manager adds
// them, with its name, its options in a Controller (defaults, flags, validation), its cache needs
// and how it is added. DefaultController, Controller's flags and validation, --controllers' help
// and its check, and the manager all read it.
var reconcilers = mustRegistry(
	// F1: repairs plans written while the webhook was away.
	reconciler{name: installplans.Name, cache: installplans.CacheNeeds, add: func(*Controller) func(manager.Manager) error { return installplans.Add }},
	// F2: reports and nudges Subscriptions out of step with their plan.
	withOptions(subscriptiondrift.Name, func(c *Controller) *subscriptiondrift.Options { return &c.SubscriptionDrift },
		subscriptiondrift.DefaultOptions, subscriptiondrift.CacheNeeds, subscriptiondrift.Add),
	// F3: the CSV cleanup finalizer.
	withOptions(csvcleanup.Name, func(c *Controller) *csvcleanup.Options { return &c.CSVCleanup },
		csvcleanup.DefaultOptions, csvcleanup.CacheNeeds, csvcleanup.Add),
	// F4: keeps OLM's unpack Jobs visible and tidy.
	withOptions(unpackjobs.Name, func(c *Controller) *unpackjobs.Options { return &c.UnpackJobs },
		unpackjobs.DefaultOptions, unpackjobs.CacheNeeds, unpackjobs.Add),
	// F5: recovers catalog pods stranded on lost nodes.
	withOptions(catalogpods.Name, func(c *Controller) *catalogpods.Options { return &c.CatalogPods },
		catalogpods.DefaultOptions, catalogpods.CacheNeeds, catalogpods.Add),
	// Runs doctor's checks every interval and exports their findings as metrics, so that the
	// failures olmguard cannot heal alone can be alerted on.
	withOptions(olmaudit.Name, func(c *Controller) *olmaudit.Options { return &c.OLMAudit },
		olmaudit.DefaultOptions, olmaudit.CacheNeeds, olmaudit.Add),
	// Shows whether the kube-apiserver calls the webhook at all (every webhook fails open): a
	// dry-run create the webhook must mutate, every interval, exported for alerting.
	withOptions(reachability.Name, func(c *Controller) *reachability.Options { return &c.WebhookProbe },
		reachability.DefaultOptions, reachability.CacheNeeds, reachability.Add),
)

// settings are a reconciler's options as the registry uses them.
type settings interface {
	BindFlags(fs *flag.FlagSet)
	Validate() error
}

// reconciler is one entry of the registry.
type reconciler struct {
	name string
	// options returns the reconciler's options in c; nil when it has none.
	options func(c *Controller) settings
	// reset sets the options in c to their defaults; nil when it has none.
	reset func(c *Controller)
	cache func() cacheneeds.Needs
	// add returns the Setup's Add with the options of c as they are now.
	add func(c *Controller) func(manager.Manager) error
}

// withOptions registers a reconciler whose options of type O are kept in a Controller at field.
func withOptions[O any, P interface {
	*O
	settings
}](name string, field func(*Controller) P, defaults func() O, cache func() cacheneeds.Needs, add func(manager.Manager, O) error) reconciler {
	return reconciler{
		name:    name,
		options: func(c *Controller) settings { return field(c) },
		reset:   func(c *Controller) { *field(c) = defaults() },
		cache:   cache,
		add: func(c *Controller) func(manager.Manager) error {
			o := *field(c)
			return func(mgr manager.Manager) error { return add(mgr, o) }
		},
	}
}

// registry is the list of reconcilers, each name once.
type registry []reconciler

// newRegistry checks that every reconciler is complete and registered once.
func newRegistry(rs ...reconciler) (registry, error) {
	seen := map[string]bool{}
	for _, r := range rs {
		switch {
		case r.name == "":
			return nil, errors.New("a reconciler without a name")
		case seen[r.name]:
			return nil, fmt.Errorf("reconciler %q registered twice", r.name)
		case r.add == nil || r.cache == nil:
			return nil, fmt.Errorf("reconciler %q: no Add or no cache needs", r.name)
		case (r.options == nil) != (r.reset == nil):
			return nil, fmt.Errorf("reconciler %q: options without defaults, or defaults without options", r.name)
		}
		seen[r.name] = true
	}
	return rs, nil
}

func mustRegistry(rs ...reconciler) registry {
	r, err := newRegistry(rs...)
	if err != nil {
		panic("setup: " + err.Error())
	}
	return r
}

// names are the reconcilers' names, in order.
func (rs registry) names() []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.name
	}
	return out
}

// defaults returns a Controller with every reconciler's default options.
func (rs registry) defaults() Controller {
	var c Controller
	for _, r := range rs {
		if r.reset != nil {
			r.reset(&c)
		}
	}
	return c
}

// bindFlags registers every reconciler's flags for the options in c, and lists the reconcilers
// in --controllers' help.
func (rs registry) bindFlags(fs *flag.FlagSet, c *Controller) {
	for _, r := range rs {
		if r.options != nil {
			r.options(c).BindFlags(fs)
		}
	}
	controller.DescribeReconcilers(fs, rs.names())
}

// validate reports the first invalid option of c.
func (rs registry) validate(c *Controller) error {
	for _, r := range rs {
		if r.options == nil {
			continue
		}
		if err := r.options(c).Validate(); err != nil {
			return err
		}
	}
	return nil
}

// setups returns every reconciler's Setup with the options of c.
func (rs registry) setups(c *Controller) []controller.Setup {
	out := make([]controller.Setup, len(rs))
	for i, r := range rs {
		out[i] = controller.Setup{Name: r.name, Cache: r.cache(), Add: r.add(c)}
	}
	return out
}

// DefaultController returns the flag defaults of every registered reconciler.
func DefaultController() Controller { return reconcilers.defaults() }

// ReconcilerNames are the names of the controller's reconcilers, in the order they are added:
// the values --controllers accepts.
func ReconcilerNames() []string { return reconcilers.names() }

// BindFlags registers every reconciler's flags, and completes --controllers' help (bound by
// controller.Options.BindFlags before) with the reconcilers' names.
func (c *Controller) BindFlags(fs *flag.FlagSet) { reconcilers.bindFlags(fs, c) }

// Validate reports the first invalid reconciler option.
func (c Controller) Validate() error { return reconcilers.validate(&c) }

// Reconcilers returns every reconciler of the controller, in the order they are added.
func (c Controller) Reconcilers() []controller.Setup { return reconcilers.setups(&c) }

// Reconciler returns the Setup of the reconciler name with the options of c, for running one
// reconciler alone (tests). It panics when no reconciler has that name.
func (c Controller) Reconciler(name string) controller.Setup {
	for _, s := range c.Reconcilers() {
		if s.Name == name {
			return s
		}
	}
	panic(fmt.Sprintf("setup: no reconciler %q", name))
}

// ValidateController checks the controller's flags as the binary does: the manager's options,
// the reconcilers --controllers names (unknown ones are rejected with the list of known ones)
// and every reconciler's options.
func ValidateController(o controller.Options, c Controller) error {
	if err := o.Validate(); err != nil {
		return err
	}
	if _, err := o.Selected(c.Reconcilers()); err != nil {
		return err
	}
	return c.Validate()
}
