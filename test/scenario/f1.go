// Package scenario replays the OLM failures olmguard fixes, on any cluster, with the OLM
// simulator. The end-to-end tests assert on the outcomes; the demo prints them.
package scenario

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/olmsim"
)

// F1Catalog serves two packages whose bundles are unpacked once and reused.
func F1Catalog() *olmsim.Catalog {
	return &olmsim.Catalog{Name: "f1", Bundles: []olmsim.Bundle{
		{Package: "alpha", Channel: "stable", CSVName: "alpha.v1.0.0", Version: "1.0.0", Image: "registry.example/f1-alpha-bundle:v1.0.0"},
		{Package: "beta", Channel: "stable", CSVName: "beta.v1.0.0", Version: "1.0.0", Image: "registry.example/f1-beta-bundle:v1.0.0"},
	}}
}

// F1Run is one replay of OLM issue #3199.
type F1Run struct {
	Plan         *v1alpha1.InstallPlan
	Manual, Auto *v1alpha1.Subscription
}

// Owned reports whether the plan, as the replay left it, is owned by both Subscriptions.
func (r F1Run) Owned() bool { return OwnedBy(r.Plan, r.Manual.UID) && OwnedBy(r.Plan, r.Auto.UID) }

// OwnedBy reports whether an InstallPlan has an ownerReference with the UID.
func OwnedBy(ip *v1alpha1.InstallPlan, uid types.UID) bool {
	for _, ref := range ip.OwnerReferences {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

// Replay3199 reproduces OLM issue #3199 in a fresh namespace: a Manual Subscription is installed,
// then an Automatic one is created between OLM's two Subscription lists, and the new plan is
// created from the stale first list. The catalog must be F1Catalog, added to sim.
func Replay3199(ctx context.Context, sim *olmsim.Sim, cat *olmsim.Catalog, ns string) (F1Run, error) {
	var r F1Run
	var err error
	if _, err = sim.CreateOperatorGroup(ctx, ns, "og"); err != nil {
		return r, err
	}
	if r.Manual, err = sim.CreateSubscription(ctx, ns, "alpha", cat, "alpha", v1alpha1.ApprovalManual); err != nil {
		return r, err
	}
	if _, err = sim.Install(ctx, ns, true); err != nil {
		return r, err
	}
	// beta's bundle is unpacked already (installed before), so its plan is made in one sync.
	if _, err := sim.WaitUnpacked(ctx, cat, &cat.Bundles[1], ns); err != nil {
		return r, err
	}
	sim.Hooks.BetweenSubscriptionLists = func(ctx context.Context, ns string) error {
		sim.Hooks.BetweenSubscriptionLists = nil
		r.Auto, err = sim.CreateSubscription(ctx, ns, "beta", cat, "beta", v1alpha1.ApprovalAutomatic)
		return err
	}
	if r.Plan, err = sim.SyncNamespace(ctx, ns); err != nil {
		return r, err
	}
	if r.Plan == nil || r.Auto == nil {
		return r, fmt.Errorf("namespace %s: no plan made for the interleaved Subscription", ns)
	}
	return r, nil
}
