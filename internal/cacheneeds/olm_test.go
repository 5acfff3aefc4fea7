package cacheneeds_test

import (
	"encoding/json"
	"testing"
	"unsafe"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// decode gives every string of the object a copy of its own, as the informer's decoder does.
func decode[T any](t *testing.T, js string) *T {
	t.Helper()
	out := new(T)
	if err := json.Unmarshal([]byte(js), out); err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	subscriptionJSON = `{"apiVersion":"operators.coreos.com/v1alpha1","kind":"Subscription","metadata":{"namespace":"team-a","name":"etcd"},
		"spec":{"name":"etcd","channel":"stable","source":"community","sourceNamespace":"olm","installPlanApproval":"Automatic"},
		"status":{"state":"AtLatestKnown","currentCSV":"etcd.v1.0.0","installedCSV":"etcd.v1.0.0",
			"installPlanRef":{"apiVersion":"operators.coreos.com/v1alpha1","kind":"InstallPlan","namespace":"team-a","name":"install-abcde"},
			"conditions":[{"type":"CatalogSourcesUnhealthy","status":"False","reason":"AllCatalogSourcesHealthy","message":"all available catalogsources are healthy"}]}}`
	installPlanJSON = `{"apiVersion":"operators.coreos.com/v1alpha1","kind":"InstallPlan","metadata":{"namespace":"team-a","name":"install-abcde"},
		"spec":{"clusterServiceVersionNames":["etcd.v1.0.0"],"approval":"Automatic","approved":true},
		"status":{"phase":"Complete","catalogSources":["community"],
			"plan":[{"resolving":"etcd.v1.0.0","status":"Created","resource":{"group":"apiextensions.k8s.io","version":"v1","kind":"CustomResourceDefinition","name":"etcdclusters.etcd.database.coreos.com","sourceName":"community","sourceNamespace":"olm","manifest":"{}"}},
				{"resolving":"etcd.v1.0.0","status":"Created","resource":{"group":"operators.coreos.com","version":"v1alpha1","kind":"ClusterServiceVersion","name":"etcd.v1.0.0","sourceName":"community","sourceNamespace":"olm"}}],
			"bundleLookups":[{"path":"quay.io/etcd/bundle:v1","identifier":"etcd.v1.0.0","replaces":"","catalogSourceRef":{"namespace":"olm","name":"community"},
				"conditions":[{"type":"BundleLookupPending","status":"True","reason":"JobIncomplete","message":"unpack job not completed"}]}]}}`
)

// TestTypedViewsShareRepeatedStrings: two Subscriptions (and two InstallPlans) of one operator,
// decoded apart, hold one copy of each string that repeats across namespaces, and their own copy
// of what names the object. Fails without shareSubscription and trimInstallPlan's interning: a
// decoder allocates every string anew, 40,000 objects' worth on a cluster of 2,000 namespaces.
func TestTypedViewsShareRepeatedStrings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		view     cacheneeds.Fields
		decode   func() client.Object
		shared   func(client.Object) []string
		unshared func(client.Object) []string
	}{{
		name:   "Subscription",
		view:   cacheneeds.SubscriptionView,
		decode: func() client.Object { return decode[v1alpha1.Subscription](t, subscriptionJSON) },
		shared: func(o client.Object) []string {
			s := o.(*v1alpha1.Subscription)
			c := s.Status.Conditions[0]
			return []string{s.APIVersion, s.Kind, s.Spec.Package, s.Spec.Channel, s.Spec.CatalogSource, s.Spec.CatalogSourceNamespace,
				string(s.Spec.InstallPlanApproval), string(s.Status.State), s.Status.CurrentCSV, s.Status.InstalledCSV,
				s.Status.InstallPlanRef.APIVersion, s.Status.InstallPlanRef.Kind, s.Status.InstallPlanRef.Namespace,
				string(c.Type), string(c.Status), c.Reason, c.Message}
		},
		unshared: func(o client.Object) []string {
			s := o.(*v1alpha1.Subscription)
			return []string{s.Name, s.Status.InstallPlanRef.Name}
		},
	}, {
		name:   "InstallPlan",
		view:   cacheneeds.InstallPlanView,
		decode: func() client.Object { return decode[v1alpha1.InstallPlan](t, installPlanJSON) },
		shared: func(o client.Object) []string {
			p := o.(*v1alpha1.InstallPlan)
			l := p.Status.BundleLookups[0]
			return []string{p.APIVersion, p.Kind, p.Spec.ClusterServiceVersionNames[0], string(p.Spec.Approval), string(p.Status.Phase),
				p.Status.CatalogSources[0], l.Path, l.Identifier, l.CatalogSourceRef.Namespace, l.CatalogSourceRef.Name,
				l.Conditions[0].Type, string(l.Conditions[0].Status), l.Conditions[0].Reason, l.Conditions[0].Message}
		},
		unshared: func(o client.Object) []string { return []string{o.GetName()} },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := tc.view.Trim(tc.decode()), tc.view.Trim(tc.decode())
			sa, sb := tc.shared(a), tc.shared(b)
			for i := range sa {
				if sa[i] != sb[i] || unsafe.StringData(sa[i]) != unsafe.StringData(sb[i]) {
					t.Errorf("string %d (%q): two copies", i, sa[i])
				}
			}
			ua, ub := tc.unshared(a), tc.unshared(b)
			for i := range ua {
				if unsafe.StringData(ua[i]) == unsafe.StringData(ub[i]) {
					t.Errorf("string %d (%q) of one object interned: a table entry for a value nothing shares", i, ua[i])
				}
			}
		})
	}
}

// TestInstallPlanViewDropsSteps: a cached plan holds no step, keeps their number and still counts
// as populated (installplan-owners patches no plan before OLM's first status), also when the
// transform runs again on it (as the informer does on a listed object). Fails without the drop:
// each plan keeps every step, dozens on an operator's plan.
func TestInstallPlanViewDropsSteps(t *testing.T) {
	p := decode[v1alpha1.InstallPlan](t, installPlanJSON)
	p.Status.BundleLookups = nil // Populated from the steps alone
	for range 2 {
		p = cacheneeds.InstallPlanView.Trim(p).(*v1alpha1.InstallPlan)
		if p.Status.Plan != nil || p.Status.DroppedSteps != 2 || !p.Status.Populated() {
			t.Fatalf("steps %d, dropped %d, populated %v: want none, 2, true", len(p.Status.Plan), p.Status.DroppedSteps, p.Status.Populated())
		}
	}
	empty := cacheneeds.InstallPlanView.Trim(decode[v1alpha1.InstallPlan](t, `{"metadata":{"name":"new"},"spec":{"approval":"Manual"}}`)).(*v1alpha1.InstallPlan)
	if empty.Status.Populated() || empty.Status.DroppedSteps != 0 {
		t.Errorf("a plan OLM has not written: populated %v, dropped %d", empty.Status.Populated(), empty.Status.DroppedSteps)
	}
}
