// Package doctor audits a live cluster for the five OLM failures olmguard fixes (F1–F5) and says,
// for each finding, how to fix it. The checks are pure functions of listed objects; Audit lists
// them. `kubectl olmguard doctor` prints the result.
package doctor

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/catalog"
	"github.com/olmguard/olmguard/pkg/cleanup"
	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/unpack"
)

// Class is the failure class of a finding (DESIGN.md).
type Class string

const (
	F1 Class = "F1" // InstallPlan missing Subscription ownerReferences
	F2 Class = "F2" // Subscription conditions out of step with the plan
	F3 Class = "F3" // CSV without the cleanup finalizer, or stuck terminating
	F4 Class = "F4" // unpack Job OLM cannot see
	F5 Class = "F5" // catalog pod on a NotReady node or stuck terminating
	// OLM is an OLM failure olmguard reports but does not heal (olm.go), with OLM's own words as
	// the finding's evidence.
	OLM Class = "OLM"
	// Webhook is olmguard's own webhook not called by the kube-apiserver (webhook.go): every
	// webhook fails open, so olmguard guards nothing at admission.
	Webhook Class = "Webhook"
)

// Finding is one problem on one object.
type Finding struct {
	Class     Class  `json:"class"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	// Check names the check that found it, stable for scripts (e.g. PlanMissingOwner).
	Check   string `json:"check"`
	Problem string `json:"problem"`
	// Evidence quotes what OLM, the kubelet or the aggregator wrote that shows the problem.
	Evidence string `json:"evidence,omitempty"`
	// Fix says, in prose, what fixes it.
	Fix string `json:"fix"`
	// Commands are the commands of the fix, in order, each exactly one kubectl invocation whose
	// names were validated as Kubernetes names of their kind and whose arguments are quoted for a
	// POSIX shell. When a name the fix needs is not valid (a tenant can write any string in an
	// ownerReference, a label or a status) there are none, and Fix says why.
	Commands []string `json:"commands,omitempty"`
}

// Sort orders findings by class, namespace, kind and name.
func Sort(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		a, b := fs[i], fs[j]
		return strings.Join([]string{string(a.Class), a.Namespace, a.Kind, a.Name, a.Check}, "\x00") <
			strings.Join([]string{string(b.Class), b.Namespace, b.Kind, b.Name, b.Check}, "\x00")
	})
}

// CheckInstallPlans finds plans that lack the ownerReference of a Subscription using them (F1,
// OLM issue #3199). Plans whose status OLM has not written yet are skipped: OLM is still making them.
func CheckInstallPlans(plans []*v1alpha1.InstallPlan, subs []*v1alpha1.Subscription) []Finding {
	// What the owner check reads of each Subscription, not a copy of it: the controller's audit
	// checks 20,000 plans and Subscriptions on a cluster of 2,000 namespaces.
	byNS := map[string][]owners.Subscription{}
	for _, s := range subs {
		byNS[s.Namespace] = append(byNS[s.Namespace], owners.FromSubscription(s))
	}
	var out []Finding
	for i := range plans {
		ip := plans[i]
		if ip.DeletionTimestamp != nil || !ip.Status.Populated() {
			continue
		}
		want := owners.InstallPlanOwners(owners.Update, ip.Name, ip.UID, ip.OwnerReferences, byNS[ip.Namespace])
		missing := missingOwners(ip, want)
		if len(missing) == 0 {
			continue
		}
		out = append(out, withCommands(Finding{Class: F1, Kind: olm.InstallPlanKind, Namespace: ip.Namespace, Name: ip.Name, Check: "PlanMissingOwner",
			Problem: fmt.Sprintf("Subscription %s uses this plan but does not own it: OLM never tells it about the plan's progress, "+
				"and the garbage collector can delete the plan while it is in use (OLM issue #3199)", strings.Join(missing, ", ")),
			Fix: "olmguard's controller adds the ownerReference (check that it runs); olmguard's webhook prevents new cases"},
			checkOlmguard()))
	}
	return out
}

func missingOwners(ip *v1alpha1.InstallPlan, want []owners.Subscription) []string {
	var missing []string
	for _, o := range want {
		if !slices.ContainsFunc(ip.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == o.UID }) {
			missing = append(missing, o.Name)
		}
	}
	return missing
}

// CheckSubscriptions finds Subscriptions whose InstallPlan conditions disagree with their plan
// (F2, olm-facts.md §2.2). A snapshot cannot tell a lagging OLM from a stuck one; Audit checks
// twice for that reason. now is the value the fix's resync annotation gets.
func CheckSubscriptions(subs []*v1alpha1.Subscription, plans []*v1alpha1.InstallPlan, now time.Time) []Finding {
	byKey := map[string]*v1alpha1.InstallPlan{}
	for i := range plans {
		byKey[plans[i].Namespace+"/"+plans[i].Name] = plans[i]
	}
	var out []Finding
	for i := range subs {
		s := subs[i]
		if s.DeletionTimestamp != nil || s.Status.InstallPlanRef == nil {
			continue
		}
		plan := byKey[s.Namespace+"/"+s.Status.InstallPlanRef.Name]
		diffs := drift.Compare(s, plan)
		if len(diffs) == 0 {
			continue
		}
		what := "InstallPlan " + s.Status.InstallPlanRef.Name + " does not exist"
		if plan != nil {
			what = fmt.Sprintf("InstallPlan %s is %s", plan.Name, phaseName(plan.Status.Phase))
			if !slices.ContainsFunc(plan.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == s.UID }) {
				what += " and does not list this Subscription as owner, so OLM does not notify it (F1)"
			}
		}
		out = append(out, withCommands(Finding{Class: F2, Kind: olm.SubscriptionKind, Namespace: s.Namespace, Name: s.Name, Check: "SubscriptionDrift",
			Problem: fmt.Sprintf("conditions out of step: %s (%s)", drift.Summary(diffs), what),
			Fix:     "olmguard's controller nudges OLM after --drift-window; by hand, annotate the Subscription so that OLM resolves it again"},
			resync(s.Namespace, s.Name, now)))
	}
	return out
}

func phaseName(p v1alpha1.InstallPlanPhase) string {
	if p == "" {
		return "not yet reconciled"
	}
	return string(p)
}

// CSV is what the F3 checks read of a CSV: its metadata (CSVs are listed metadata-only).
type CSV = metav1.PartialObjectMetadata

// CheckCSVs finds CSVs that a deletion would leave leftovers for (no cleanup finalizer), and CSVs
// stuck terminating for longer than stuckAfter (F3). When no CSV carries olmguard's finalizer,
// olmguard does not run here: that is one finding, not one per CSV, so that a user auditing a
// cluster before installing olmguard sees the real problems first.
func CheckCSVs(csvs []CSV, now time.Time, stuckAfter time.Duration) []Finding {
	var out []Finding
	guarded, unguarded := false, 0
	for i := range csvs {
		c := &csvs[i]
		f := Finding{Class: F3, Kind: olm.ClusterServiceVersionKind, Namespace: c.Namespace, Name: c.Name}
		if c.DeletionTimestamp != nil {
			if age := now.Sub(c.DeletionTimestamp.Time); age >= stuckAfter && len(c.Finalizers) > 0 {
				f.Check = "CSVStuckTerminating"
				f.Problem = fmt.Sprintf("being deleted for %s, held by finalizers %s", age.Round(time.Second), strings.Join(c.Finalizers, ", "))
				f.Fix = "OLM's olm-operator releases operators.coreos.com/csv-cleanup"
				if cleanup.HasFinalizer(c.Finalizers) {
					f.Fix = "olmguard's controller runs the cleanup and releases olmguard.io/cleanup (check that it runs, and its Events on this CSV); " +
						"to give up the cleanup: kubectl olmguard uninstall"
					// The uninstall stays in the prose: it is a choice, not a step of the fix.
					f = withCommands(f, checkOlmguard())
				}
				out = append(out, f)
			}
			continue
		}
		guarded = guarded || cleanup.HasFinalizer(c.Finalizers)
		view := cleanup.CSVView{Namespace: c.Namespace, Labels: c.Labels, Annotations: c.Annotations, Finalizers: c.Finalizers}
		if cleanup.WantsCleanupFinalizer(view) && !cleanup.HasFinalizer(c.Finalizers) {
			f.Check = "CSVWithoutCleanupFinalizer"
			f.Problem = "no olmguard.io/cleanup finalizer: deleting it while OLM's olm-operator is down leaves its ClusterRoles, bindings and webhooks behind"
			f.Fix = "olmguard's controller adds it (first command: check that it runs); or opt this CSV out (second command)"
			out = append(out, withCommands(f, checkOlmguard(),
				kubectl(c.Namespace, "annotate", "csv").Name("", olm.ClusterServiceVersionKind, c.Name).Args(olmguard.CleanupAnnotation+"="+olmguard.CleanupDisabled)))
			unguarded++
		}
	}
	if guarded || unguarded == 0 {
		return out
	}
	out = slices.DeleteFunc(out, func(f Finding) bool { return f.Check == "CSVWithoutCleanupFinalizer" })
	return append(out, withCommands(Finding{Class: F3, Check: "OlmguardNotRunning",
		Problem: fmt.Sprintf("none of the %d CSVs carries olmguard.io/cleanup: olmguard is not installed or its controller does not run, "+
			"so deleting a CSV while OLM's olm-operator is down leaves its ClusterRoles, bindings and webhooks behind", unguarded),
		Fix: "install olmguard (see its README), or check that its controller runs"}, checkOlmguard()))
}

// CheckOrphanCSVs finds operators left installed with no Subscription (F3): CSVs that no
// Subscription of their namespace has installed. OLM's rule (its resolver's CSV source,
// pkg/controller/registry/resolver/source_csvs.go): a CSV is a Subscription's when one of the
// namespace has it as status.installedCSV; any other is freestanding, never upgraded, and kept by
// every resolution of the namespace. An uninstall during an install or upgrade leaves one: OLM
// executes the running plan to its end and creates the CSV again (docs/cleanup.md), in a namespace
// that may hold other operators' Subscriptions (an openshift-operators-style global namespace).
// Not reported: CSVs being installed (a Subscription's status.currentCSV, before OLM sets
// installedCSV) or replaced by one a Subscription names (an upgrade, which deletes them once it
// succeeds), those a Subscription's failed resolution blames (CheckBlockingCSVs reports them),
// copies of a CSV, CSVs being deleted and the CSVs OLM installs itself (packageserver, labelled
// olm.version).
func CheckOrphanCSVs(csvs []v1alpha1.ClusterServiceVersion, subs []*v1alpha1.Subscription) []Finding {
	named := subscribedCSVs(subs) // and below, those a Subscription's failed resolution blames
	for _, s := range subs {
		if s.DeletionTimestamp == nil {
			for _, name := range drift.BlamedCSVs(s) {
				named[s.Namespace+"/"+name] = true
			}
		}
	}
	replacedByNamed := map[string]bool{}
	for i := range csvs {
		c := &csvs[i]
		if r := c.Spec.Replaces; r != "" && named[c.Namespace+"/"+c.Name] {
			replacedByNamed[c.Namespace+"/"+r] = true
		}
	}
	var out []Finding
	for i := range csvs {
		c := &csvs[i]
		key := c.Namespace + "/" + c.Name
		_, olmOwn := c.Labels[olm.VersionLabel]
		if named[key] || replacedByNamed[key] || c.DeletionTimestamp != nil || olmOwn || olm.IsCopiedCSV(c.Namespace, c.Labels, c.Annotations, "") {
			continue
		}
		out = append(out, withCommands(Finding{Class: F3, Kind: olm.ClusterServiceVersionKind, Namespace: c.Namespace, Name: c.Name, Check: "CSVWithoutSubscription",
			Problem: "no Subscription of its namespace has it installed (status.installedCSV): OLM takes it for an operator installed by hand and never upgrades it; " +
				"an uninstall that raced an install or upgrade leaves one behind",
			Fix: fmt.Sprintf("if the operator was uninstalled, delete the CSV (olmguard removes what OLM created for it); "+
				"to keep it: create a Subscription to its package in %s", c.Namespace)},
			kubectl(c.Namespace, "delete", "csv").Name("", olm.ClusterServiceVersionKind, c.Name)))
	}
	return out
}

// UnpackConfigMaps reports whether a Job's ConfigMap ownerReference names one of OLM's unpack
// ConfigMaps that exists in namespace with the reference's UID (unpack.IsUnpackOwner).
type UnpackConfigMaps func(namespace string, owner metav1.OwnerReference) bool

// unpackOwner is the name of the OLM unpack ConfigMap owning j, "" when it has none: an
// ownerReference of apiVersion v1, kind ConfigMap, naming one of OLM's unpack ConfigMaps that
// exists with that UID (pkg/unpack's rule). A tenant can write any ownerReference on its own Job.
func unpackOwner(j *batchv1.Job, unpackConfigMap UnpackConfigMaps) string {
	ref, ok := unpack.ConfigMapOwnerRef(j)
	if !ok || !unpackConfigMap(j.Namespace, ref) {
		return ""
	}
	return ref.Name
}

// CheckUnpackJobs finds bundle unpack Jobs OLM v0.26+ cannot see (F4, OLM issue #3210).
func CheckUnpackJobs(jobs []batchv1.Job, unpackConfigMap UnpackConfigMaps) []Finding {
	var out []Finding
	for i := range jobs {
		j := &jobs[i]
		if j.DeletionTimestamp != nil || unpack.Visible(j) {
			continue
		}
		cm := unpackOwner(j, unpackConfigMap)
		if cm == "" {
			continue
		}
		f := Finding{Class: F4, Kind: "Job", Namespace: j.Namespace, Name: j.Name, Check: "UnpackJobInvisible",
			Problem: fmt.Sprintf("unpack Job of bundle %s without the labels OLM v0.26+ finds it by (%s, %s=true)", cm, olm.BundleUnpackRefLabel, olm.ManagedLabel),
			Fix:     "olmguard's controller labels it (running) or deletes it (finished); by hand, delete it"}
		if j.Name == cm {
			f.Check = "UnpackJobNameConflict"
			f.Problem = fmt.Sprintf("holds the name OLM creates the unpack Job of bundle %s under, but OLM cannot find it by label: "+
				"installing this bundle again fails with jobs.batch %q already exists (OLM issue #3210)", cm, j.Name)
		}
		out = append(out, withCommands(f, kubectl(j.Namespace, "delete", "job").Name("", "Job", j.Name)))
	}
	return out
}

// CheckCatalogPods finds catalog pods on NotReady or missing nodes, and catalog pods stuck
// terminating for longer than stuckAfter: the catalog serves nothing until they are gone (F5,
// OLM issue #3208). It finds catalog pods in a terminal phase (Failed, e.g. Evicted), which OLM
// keeps as its registry server (OLM #3459, #3519, OCPBUGS-46474), on any node. It also finds catalog pods whose registry container was OOMKilled or is in
// CrashLoopBackOff (class OLM), from the container statuses the kubelet writes; OLM's registry
// update pods are left out (OLM deletes failing ones itself). owned (nil: every pod) tells the
// pods of a live CatalogSource (CatalogPodOwned): only those get F5 findings, the ones
// olmguard's controller heals; a tenant's pod labelled olm.catalogSource is not one of them.
func CheckCatalogPods(pods []corev1.Pod, nodes []corev1.Node, now time.Time, stuckAfter time.Duration, owned func(*corev1.Pod) bool) []Finding {
	byName := map[string]*corev1.Node{}
	for i := range nodes {
		byName[nodes[i].Name] = &nodes[i]
	}
	var out []Finding
	for i := range pods {
		p := &pods[i]
		if _, ok := p.Labels[olm.CatalogSourceLabel]; !ok {
			continue
		}
		f5 := owned == nil || owned(p)
		if f5 && catalog.PodTerminal(p) {
			out = append(out, catalogPodTerminal(p))
			continue
		}
		if p.Spec.NodeName == "" {
			continue
		}
		f := Finding{Class: F5, Kind: "Pod", Namespace: p.Namespace, Name: p.Name,
			Fix: "olmguard's controller force-deletes it after --catalog-pod-grace so OLM recreates it on a healthy node; by hand, force-delete it"}
		node := byName[p.Spec.NodeName]
		switch {
		case f5 && node == nil:
			f.Check, f.Problem = "CatalogPodNodeGone", fmt.Sprintf("catalog %s runs on node %s, which no longer exists", p.Labels[olm.CatalogSourceLabel], p.Spec.NodeName)
		case f5 && !catalog.NodeReady(node):
			f.Check, f.Problem = "CatalogPodNodeNotReady", fmt.Sprintf("catalog %s runs on node %s, which is NotReady", p.Labels[olm.CatalogSourceLabel], p.Spec.NodeName)
		case f5 && p.DeletionTimestamp != nil && now.Sub(p.DeletionTimestamp.Time) >= stuckAfter:
			f.Check, f.Problem = "CatalogPodStuckTerminating", fmt.Sprintf("catalog %s pod terminating for %s past its grace period",
				p.Labels[olm.CatalogSourceLabel], now.Sub(p.DeletionTimestamp.Time).Round(time.Second))
		default:
			_, update := p.Labels[olm.CatalogSourceUpdateLabel]
			check, evidence, container := catalogContainerFailure(p)
			if check == "" || update || p.DeletionTimestamp != nil {
				continue
			}
			out = append(out, catalogPodFailure(p, check, evidence, container))
			continue
		}
		out = append(out, withCommands(f, kubectl(p.Namespace, "delete", "pod").Name("", "Pod", p.Name).Args("--force", "--grace-period=0")))
	}
	return out
}

// catalogPodTerminal is the F5 finding on a catalog pod in a terminal phase, with what the
// kubelet wrote (phase, reason, message) as evidence.
func catalogPodTerminal(p *corev1.Pod) Finding {
	evidence := "phase " + string(p.Status.Phase)
	if p.Status.Reason != "" {
		evidence += ", reason " + p.Status.Reason
	}
	if p.Status.Message != "" {
		evidence += ": " + p.Status.Message
	}
	on := "never scheduled"
	if p.Spec.NodeName != "" {
		on = "on node " + p.Spec.NodeName
	}
	f := Finding{Class: F5, Kind: "Pod", Namespace: p.Namespace, Name: p.Name, Check: "CatalogPodFailed",
		Problem: fmt.Sprintf("catalog %s pod is %s (%s) and serves nothing, but OLM keeps it and creates no other (OLM issues #3459, #3519)",
			p.Labels[olm.CatalogSourceLabel], p.Status.Phase, on),
		Evidence: evidence,
		Fix:      "olmguard's controller deletes it at once so OLM recreates it; by hand, delete it"}
	return withCommands(f, kubectl(p.Namespace, "delete", "pod").Name("", "Pod", p.Name).Args("--force", "--grace-period=0"))
}

// CatalogPodOwned tells the pods owned by one of cats as pkg/catalog requires before the
// controller acts: an ownerReference to a CatalogSource of the pod's namespace, same name and UID.
// With listed false (the CatalogSources could not be read) an ownerReference to any CatalogSource
// is enough.
func CatalogPodOwned(cats []v1alpha1.CatalogSource, listed bool) func(*corev1.Pod) bool {
	uids := map[types.NamespacedName]types.UID{}
	for i := range cats {
		uids[types.NamespacedName{Namespace: cats[i].Namespace, Name: cats[i].Name}] = cats[i].UID
	}
	return func(p *corev1.Pod) bool {
		ref, ok := catalog.CatalogSourceOwner(p)
		if !ok || !listed {
			return ok
		}
		return catalog.OwnedByCatalogSource(p, uids[types.NamespacedName{Namespace: p.Namespace, Name: ref.Name}])
	}
}
