package setup

import (
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/pkg/controller/catalogpods"
	"github.com/olmguard/olmguard/pkg/controller/csvcleanup"
	"github.com/olmguard/olmguard/pkg/controller/olmaudit"
	"github.com/olmguard/olmguard/pkg/controller/reachability"
	"github.com/olmguard/olmguard/pkg/controller/subscriptiondrift"
	"github.com/olmguard/olmguard/pkg/controller/unpackjobs"
)

// The registry refuses a reconciler registered twice, or one it could not run.
func TestNewRegistryRejects(t *testing.T) {
	add := func(*Controller) func(manager.Manager) error { return func(manager.Manager) error { return nil } }
	cache := func() cacheneeds.Needs { return nil }
	plain := func(name string) reconciler { return reconciler{name: name, add: add, cache: cache} }
	drift := withOptions("drift", func(c *Controller) *subscriptiondrift.Options { return &c.SubscriptionDrift },
		subscriptiondrift.DefaultOptions, subscriptiondrift.CacheNeeds, subscriptiondrift.Add)
	for name, tc := range map[string]struct {
		rs      []reconciler
		wantErr string // "" : accepted
	}{
		"distinct names":           {rs: []reconciler{plain("a"), plain("b"), drift}},
		"registered twice":         {rs: []reconciler{plain("a"), plain("b"), plain("a")}, wantErr: `reconciler "a" registered twice`},
		"options registered twice": {rs: []reconciler{drift, drift}, wantErr: `reconciler "drift" registered twice`},
		"no name":                  {rs: []reconciler{plain("")}, wantErr: "a reconciler without a name"},
		"no add":                   {rs: []reconciler{{name: "a", cache: cache}}, wantErr: `reconciler "a": no Add`},
		"no cache needs":           {rs: []reconciler{{name: "a", add: add}}, wantErr: `reconciler "a": no Add or no cache needs`},
		"options, no defaults":     {rs: []reconciler{{name: "a", add: add, cache: cache, options: drift.options}}, wantErr: "options without defaults"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := newRegistry(tc.rs...)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
	defer func() {
		if recover() == nil {
			t.Error("mustRegistry accepted a reconciler registered twice")
		}
	}()
	mustRegistry(plain("a"), plain("a"))
}

// --controllers' help lists every registered reconciler exactly once, in the registry's order.
func TestControllersHelpListsEachReconcilerOnce(t *testing.T) {
	o, c := controller.DefaultOptions(), DefaultController()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.BindFlags(fs)
	c.BindFlags(fs)
	_, list, ok := strings.Cut(fs.Lookup("controllers").Usage, "all when empty: ")
	if !ok {
		t.Fatalf("--controllers' help lists no reconciler: %q", fs.Lookup("controllers").Usage)
	}
	listed := strings.Split(list, ", ")
	if !slices.Equal(listed, ReconcilerNames()) {
		t.Errorf("--controllers lists %q, the registry %q", listed, ReconcilerNames())
	}
	for _, s := range c.Reconcilers() {
		if n := slices.Index(listed, s.Name); n < 0 || slices.Index(listed[n+1:], s.Name) >= 0 {
			t.Errorf("reconciler %q listed %d times", s.Name, strings.Count(list, s.Name))
		}
	}
	if len(listed) != len(c.Reconcilers()) {
		t.Errorf("%d names listed for %d reconcilers", len(listed), len(c.Reconcilers()))
	}
}

// --controllers is checked against the registry with the flags: an unknown name is rejected with
// the list of the known ones.
func TestValidateControllerSelection(t *testing.T) {
	known := "(known: installplan-owners, subscription-drift, csv-cleanup, unpack-jobs, catalog-pods, olm-audit, webhook-probe)"
	for name, tc := range map[string]struct {
		args    []string
		wantErr string // "" : valid
		want    []string
	}{
		"all by default":           {want: ReconcilerNames()},
		"some, in the given order": {args: []string{"--controllers=olm-audit, csv-cleanup"}, want: []string{"olm-audit", "csv-cleanup"}},
		"every one":                {args: []string{"--controllers=" + strings.Join(ReconcilerNames(), ",")}, want: ReconcilerNames()},
		"unknown":                  {args: []string{"--controllers=csv-cleanup,nope"}, wantErr: `--controllers: unknown reconciler "nope" ` + known},
		"case matters":             {args: []string{"--controllers=CSV-Cleanup"}, wantErr: `unknown reconciler "CSV-Cleanup"`},
		"a reconciler's flag":      {args: []string{"--drift-window=0s"}, wantErr: "--drift-window"},
		"a manager's flag":         {args: []string{"--leader-election-namespace=Nope!"}, wantErr: "--leader-election-namespace"},
	} {
		t.Run(name, func(t *testing.T) {
			o, c := controller.DefaultOptions(), DefaultController()
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o.BindFlags(fs)
			c.BindFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := ValidateController(o, c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			selected, _ := o.Selected(c.Reconcilers())
			var names []string
			for _, s := range selected {
				names = append(names, s.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("selected %q, want %q", names, tc.want)
			}
		})
	}
}

// Every reconciler gets its package's defaults, and Reconciler finds each one by name.
func TestRegistryDefaultsAndLookup(t *testing.T) {
	want := Controller{SubscriptionDrift: subscriptiondrift.DefaultOptions(), CSVCleanup: csvcleanup.DefaultOptions(),
		UnpackJobs: unpackjobs.DefaultOptions(), CatalogPods: catalogpods.DefaultOptions(), OLMAudit: olmaudit.DefaultOptions(),
		WebhookProbe: reachability.DefaultOptions()}
	c := DefaultController()
	if !reflect.DeepEqual(c, want) {
		t.Errorf("DefaultController() = %+v, want %+v", c, want)
	}
	for _, name := range ReconcilerNames() {
		if s := c.Reconciler(name); s.Name != name || s.Add == nil {
			t.Errorf("Reconciler(%q) = %+v", name, s)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("Reconciler of an unknown name did not panic")
		}
	}()
	c.Reconciler("nope")
}
