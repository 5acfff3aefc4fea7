package cacheneeds

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// InstallPlanView is the field set of the reconcilers that read InstallPlans from the cache
// (installplan-owners, subscription-drift, the OLM audit): the typed view without the plan's steps
// (Status.DroppedSteps keeps their number, for InstallPlanStatus.Populated), its repeated strings
// shared. An operator's plan often has dozens of steps, each a few hundred bytes, and plans of
// OLM before bundle unpacking carry whole manifests there; no reader of the cache reads them (the
// cleanup reads plans' steps live: csvcleanup.readPlans).
var InstallPlanView = Fields{Name: "InstallPlan typed view without steps", Trim: trimInstallPlan}

// SubscriptionView is the field set of the reconcilers that read Subscriptions from the cache: the
// typed view, its repeated strings shared.
var SubscriptionView = Fields{Name: "Subscription typed view", Trim: shareSubscription}

func trimInstallPlan(obj client.Object) client.Object {
	ip, ok := obj.(*v1alpha1.InstallPlan)
	if !ok {
		return obj
	}
	ip.Status.DropSteps()
	shareTypeMeta(&ip.TypeMeta)
	internAll(ip.Spec.ClusterServiceVersionNames)
	internAll(ip.Status.CatalogSources)
	ip.Spec.Approval = internAs(ip.Spec.Approval)
	ip.Status.Phase = internAs(ip.Status.Phase)
	for i := range ip.Status.Conditions {
		c := &ip.Status.Conditions[i]
		c.Type, c.Status, c.Reason, c.Message = Intern(c.Type), internAs(c.Status), Intern(c.Reason), Intern(c.Message)
	}
	for i := range ip.Status.BundleLookups {
		l := &ip.Status.BundleLookups[i]
		l.Path, l.Identifier, l.Replaces = Intern(l.Path), Intern(l.Identifier), Intern(l.Replaces)
		if r := l.CatalogSourceRef; r != nil {
			r.APIVersion, r.Kind, r.Namespace, r.Name = Intern(r.APIVersion), Intern(r.Kind), Intern(r.Namespace), Intern(r.Name)
		}
		for j := range l.Conditions {
			c := &l.Conditions[j]
			c.Type, c.Status, c.Reason, c.Message = Intern(c.Type), internAs(c.Status), Intern(c.Reason), Intern(c.Message)
		}
	}
	return ip
}

// shareSubscription shares the strings that repeat across Subscriptions (one operator subscribed
// in many namespaces: its package, channel, catalog and CSV names), not those of one object
// (its name, UID, the name of its current plan).
func shareSubscription(obj client.Object) client.Object {
	sub, ok := obj.(*v1alpha1.Subscription)
	if !ok {
		return obj
	}
	shareTypeMeta(&sub.TypeMeta)
	sp := &sub.Spec
	sp.CatalogSource, sp.CatalogSourceNamespace, sp.Package = Intern(sp.CatalogSource), Intern(sp.CatalogSourceNamespace), Intern(sp.Package)
	sp.Channel, sp.StartingCSV, sp.InstallPlanApproval = Intern(sp.Channel), Intern(sp.StartingCSV), internAs(sp.InstallPlanApproval)
	st := &sub.Status
	st.CurrentCSV, st.InstalledCSV, st.State = Intern(st.CurrentCSV), Intern(st.InstalledCSV), internAs(st.State)
	if r := st.Install; r != nil {
		r.APIVersion, r.Kind = Intern(r.APIVersion), Intern(r.Kind)
	}
	if r := st.InstallPlanRef; r != nil {
		r.APIVersion, r.Kind, r.Namespace = Intern(r.APIVersion), Intern(r.Kind), Intern(r.Namespace)
	}
	for i := range st.Conditions {
		c := &st.Conditions[i]
		c.Type, c.Status, c.Reason, c.Message = internAs(c.Type), internAs(c.Status), Intern(c.Reason), Intern(c.Message)
	}
	return sub
}

// shareTypeMeta shares an object's apiVersion and kind: decoding a list gives each item its own.
func shareTypeMeta(tm *metav1.TypeMeta) {
	tm.APIVersion, tm.Kind = Intern(tm.APIVersion), Intern(tm.Kind)
}

func internAll(ss []string) {
	for i, s := range ss {
		ss[i] = Intern(s)
	}
}

// internAs interns a value of a string type (a phase, a condition status).
func internAs[S ~string](s S) S { return S(Intern(string(s))) }

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
