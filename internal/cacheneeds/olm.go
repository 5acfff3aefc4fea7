package cacheneeds

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// InstallPlanView is the field set of the reconcilers that read InstallPlans from the cache
// (installplan-owners, subscription-drift): the typed view without each step's manifest. Plans of
// OLM before bundle unpacking carry whole manifests there, and neither reconciler reads them
// (the cleanup reads plans' steps live: csvcleanup.planCRDs).
var InstallPlanView = Fields{Name: "InstallPlan typed view without step manifests", Trim: trimInstallPlan}

func trimInstallPlan(obj client.Object) client.Object {
	ip, ok := obj.(*v1alpha1.InstallPlan)
	if !ok {
		return obj
	}
	for _, st := range ip.Status.Plan {
		if st != nil {
			st.Resource.Manifest = ""
		}
	}
	return ip
}

// NotOLMCopies and TrackedCopies are the two selections of CSVs the controller caches: every CSV but OLM's copies of an
// AllNamespaces operator (label olm.copiedFrom, 20,000 of them of 40 KB and more on a cluster of
// 2,000 namespaces, as OLM's own informers leave them out), and those labelled olm.copiedFrom that
// hold olmguard's finalizer, which the webhook and the controller label olmguard.io/cleanup-tracked
// (someone labelled a guarded CSV as a copy: its cleanup must still run). Every reconciler that
// reads CSVs through the cache declares both (Kind.Also).
var (
	NotOLMCopies  = labels.NewSelector().Add(mustRequirement(olm.CopiedFromLabel, selection.DoesNotExist))
	TrackedCopies = labels.NewSelector().Add(mustRequirement(olm.CopiedFromLabel, selection.Exists), mustRequirement(olmguard.CleanupTrackedLabel, selection.Exists))
	// UntrackedCopies is what the cache leaves out: the CSVs labelled olm.copiedFrom and not
	// tracked, among which csv-cleanup's tracker looks for finalized ones to label.
	UntrackedCopies = labels.NewSelector().Add(mustRequirement(olm.CopiedFromLabel, selection.Exists), mustRequirement(olmguard.CleanupTrackedLabel, selection.DoesNotExist))
)

func mustRequirement(key string, op selection.Operator) labels.Requirement {
	r, err := labels.NewRequirement(key, op, nil)
	if err != nil {
		panic(err) // constant keys
	}
	return *r
}
