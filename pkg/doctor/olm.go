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

	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// The checks in this file find OLM failures olmguard reports but does not heal (class OLM): each
// finding quotes what OLM (or the kubelet, or the aggregator) wrote as its Evidence.

// OLM CSV reasons the OperatorGroup check quotes (olm-operator's operatorGroupForCSV).
const (
	ReasonTooManyOperatorGroups = "TooManyOperatorGroups"
	ReasonNoOperatorGroup       = "NoOperatorGroup"
)

// CheckBlockingCSVs finds installed CSVs that a Subscription's failed resolution blames and that
// no Subscription references (status.installedCSV or currentCSV): OLM's solver keeps the CSV,
// refuses to install the package again beside it ("constraints not satisfiable ... exists and is
// not referenced by a subscription") and, for this reason, never retries by itself. An uninstall
// that deleted only the Subscription leaves one.
func CheckBlockingCSVs(csvs []CSV, subs []v1alpha1.Subscription) []Finding {
	present := map[string]*CSV{}
	for i := range csvs {
		present[csvs[i].Namespace+"/"+csvs[i].Name] = &csvs[i]
	}
	referenced := map[string]bool{}
	for _, s := range subs {
		referenced[s.Namespace+"/"+s.Status.InstalledCSV] = true
		referenced[s.Namespace+"/"+s.Status.CurrentCSV] = true
	}
	blamedBy := map[string][]*v1alpha1.Subscription{}
	var order []string
	for i := range subs {
		s := &subs[i]
		if s.DeletionTimestamp != nil {
			continue
		}
		for _, name := range drift.BlamedCSVs(s) {
			key := s.Namespace + "/" + name
			c := present[key]
			if c == nil || referenced[key] || c.DeletionTimestamp != nil || olm.IsCopiedCSV(c.Namespace, c.Labels, c.Annotations, "") {
				continue
			}
			if blamedBy[key] == nil {
				order = append(order, key)
			}
			blamedBy[key] = append(blamedBy[key], s)
		}
	}
	var out []Finding
	for _, key := range order {
		c, by := present[key], blamedBy[key]
		var names, evidence, nudges []string
		for _, s := range by {
			cond := s.Status.GetCondition(v1alpha1.SubscriptionResolutionFailed)
			names = append(names, s.Name)
			evidence = append(evidence, fmt.Sprintf("Subscription %s: ResolutionFailed=True, %s: %s", s.Name, cond.Reason, cond.Message))
			nudges = append(nudges, fmt.Sprintf("kubectl -n %s annotate subscription %s %s=\"$(date +%%s)\" --overwrite", s.Namespace, s.Name, olmguard.ResyncAnnotation))
		}
		out = append(out, Finding{Class: OLM, Kind: olm.ClusterServiceVersionKind, Namespace: c.Namespace, Name: c.Name, Check: "OrphanCSVBlocksResolution",
			Problem: fmt.Sprintf("installed without a Subscription referencing it, it blocks the resolution of Subscription %s; "+
				"OLM does not retry a ConstraintsNotSatisfiable resolution by itself", strings.Join(names, ", ")),
			Evidence: strings.Join(evidence, "; "),
			Fix: fmt.Sprintf("remove the orphan (its operator stops; CRDs and custom resources stay) and let OLM resolve again: kubectl -n %s delete csv %s && %s",
				c.Namespace, c.Name, strings.Join(nudges, " && "))})
	}
	return out
}

// stuckPhases are the CSV phases of an install in progress.
var stuckPhases = []v1alpha1.ClusterServiceVersionPhase{v1alpha1.CSVPhasePending, "InstallReady", v1alpha1.CSVPhaseInstalling}

// CheckStuckCSVs finds CSVs in Pending, InstallReady or Installing for longer than after, counted
// from status.lastTransitionTime (OLM moves it on phase changes only; the creation time when
// unset), with OLM's reason and message as evidence and a fix by reason.
func CheckStuckCSVs(csvs []v1alpha1.ClusterServiceVersion, now time.Time, after time.Duration) []Finding {
	var out []Finding
	for i := range csvs {
		c := &csvs[i]
		copied := olm.IsCopiedCSV(c.Namespace, c.Labels, c.Annotations, string(c.Status.Reason)) // reported where it is installed
		if c.DeletionTimestamp != nil || copied || !slices.Contains(stuckPhases, c.Status.Phase) {
			continue
		}
		since := c.CreationTimestamp.Time
		if t := c.Status.LastTransitionTime; t != nil {
			since = t.Time
		}
		age := now.Sub(since)
		if age < after {
			continue
		}
		f := Finding{Class: OLM, Kind: olm.ClusterServiceVersionKind, Namespace: c.Namespace, Name: c.Name, Check: "CSVStuckInstalling",
			Problem: fmt.Sprintf("%s for %s (longer than %s): the operator is not running", c.Status.Phase, age.Round(time.Second), after),
			Evidence: fmt.Sprintf("status.phase=%s, reason %s: %s (lastTransitionTime %s)", c.Status.Phase, c.Status.Reason, c.Status.Message,
				since.UTC().Format(time.RFC3339))}
		switch c.Status.Reason {
		case "RequirementsNotMet", "RequirementsUnknown":
			f.Fix = fmt.Sprintf("list what it misses, then create it (OLM retries by itself): kubectl -n %s get csv %s -o jsonpath="+
				`'{range .status.requirementStatus[?(@.status!="Present")]}{.kind} {.name}: {.status} {.message}{"\n"}{end}'`, c.Namespace, c.Name)
		default: // InstallWaiting, InstallSucceeded in Installing, NeedsReinstall...: the Deployments do not come up
			f.Fix = fmt.Sprintf("see why its Deployments are not available (image, crash, quota, scheduling), then fix that: "+
				"kubectl -n %s describe deployments -l %s=%s && kubectl -n %s get events --sort-by=.lastTimestamp",
				c.Namespace, olm.OwnerLabel, c.Name, c.Namespace)
		}
		out = append(out, f)
	}
	return out
}

// CheckOperatorGroups finds namespaces with more than one OperatorGroup (OLM fails every CSV there
// with TooManyOperatorGroups, OLM PR #669) and namespaces with Subscriptions but no OperatorGroup
// (OLM's CSVs there fail with NoOperatorGroup). csvs supply OLM's failures as evidence.
func CheckOperatorGroups(ogs []olmv1.OperatorGroup, subs []v1alpha1.Subscription, csvs []v1alpha1.ClusterServiceVersion) []Finding {
	byNS := map[string][]*olmv1.OperatorGroup{}
	for i := range ogs {
		if ogs[i].DeletionTimestamp == nil {
			byNS[ogs[i].Namespace] = append(byNS[ogs[i].Namespace], &ogs[i])
		}
	}
	failed := map[string][]string{} // namespace/reason -> CSV evidence
	for _, c := range csvs {
		if r := string(c.Status.Reason); c.Status.Phase == v1alpha1.CSVPhaseFailed && (r == ReasonTooManyOperatorGroups || r == ReasonNoOperatorGroup) {
			failed[c.Namespace+"/"+r] = append(failed[c.Namespace+"/"+r], fmt.Sprintf("CSV %s: Failed, %s: %s", c.Name, r, c.Status.Message))
		}
	}
	var out []Finding
	for _, ns := range sortedKeys(byNS) {
		groups := byNS[ns]
		if len(groups) < 2 {
			continue
		}
		sort.SliceStable(groups, func(i, j int) bool {
			a, b := groups[i], groups[j]
			if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
				return a.CreationTimestamp.Before(&b.CreationTimestamp)
			}
			return a.Name < b.Name
		})
		var names, extra []string
		for _, g := range groups {
			names = append(names, g.Name)
		}
		extra = names[1:]
		evidence := append([]string{"OperatorGroups " + strings.Join(names, ", ") + " (oldest first)"}, failed[ns+"/"+ReasonTooManyOperatorGroups]...)
		out = append(out, Finding{Class: OLM, Kind: olm.OperatorGroupKind, Namespace: ns, Name: extra[len(extra)-1], Check: "TooManyOperatorGroups",
			Problem:  fmt.Sprintf("%d OperatorGroups in one namespace: OLM installs nothing here and fails the installed CSVs (TooManyOperatorGroups)", len(groups)),
			Evidence: strings.Join(evidence, "; "),
			Fix: fmt.Sprintf("keep one OperatorGroup (here the oldest, %s) and delete the others: kubectl -n %s delete operatorgroup %s",
				names[0], ns, strings.Join(extra, " "))})
	}
	subsByNS := map[string][]string{}
	for _, s := range subs {
		if s.DeletionTimestamp == nil {
			subsByNS[s.Namespace] = append(subsByNS[s.Namespace], s.Name)
		}
	}
	for _, ns := range sortedKeys(subsByNS) {
		if len(byNS[ns]) > 0 {
			continue
		}
		evidence := append([]string{"Subscriptions " + strings.Join(subsByNS[ns], ", ") + " and no OperatorGroup"}, failed[ns+"/"+ReasonNoOperatorGroup]...)
		og := fmt.Sprintf(`{"apiVersion":"%s","kind":"OperatorGroup","metadata":{"name":"%s","namespace":"%s"},"spec":{"targetNamespaces":["%s"]}}`,
			olm.V1APIVersion, ns, ns, ns)
		out = append(out, Finding{Class: OLM, Kind: "Namespace", Namespace: ns, Name: ns, Check: "NoOperatorGroup",
			Problem:  "Subscriptions but no OperatorGroup: OLM's CSVs here fail with NoOperatorGroup and the operators do not run",
			Evidence: strings.Join(evidence, "; "),
			Fix:      fmt.Sprintf("create one (for an operator that supports only AllNamespaces, drop spec.targetNamespaces): echo '%s' | kubectl apply -f -", og)})
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Bundle unpack failures. OLM before v0.43 never retries a failed unpack Job (OLM issue #2265;
// the retry annotation exists since v0.26): until the Job and its ConfigMap are deleted, every
// resolution of that bundle fails again.
const (
	bundleLookupFailed = "BundleLookupFailed"
	unpackFailedPrefix = "bundle unpacking failed"
)

// CheckUnpackFailures finds failed bundle unpacks, as OLM records them: a failed unpack Job (e.g.
// DeadlineExceeded), a Subscription with BundleUnpackFailed, and an InstallPlan Failed on a bundle
// lookup. Each fix names the cleanup that lets OLM unpack again. jobs are unpack Jobs owned by
// OLM's ConfigMaps (Audit's selection); ogs give the OperatorGroup to annotate.
func CheckUnpackFailures(jobs []batchv1.Job, subs []v1alpha1.Subscription, plans []v1alpha1.InstallPlan, ogs []olmv1.OperatorGroup) []Finding {
	var out []Finding
	failedJobs := map[string][]string{} // namespace -> cleanup commands
	for i := range jobs {
		j := &jobs[i]
		cond := jobFailed(j)
		if cond == nil || j.DeletionTimestamp != nil {
			continue
		}
		cleanup := fmt.Sprintf("kubectl -n %s delete job/%s configmap/%s", j.Namespace, j.Name, configMapOf(j))
		failedJobs[j.Namespace] = append(failedJobs[j.Namespace], cleanup)
		out = append(out, Finding{Class: OLM, Kind: "Job", Namespace: j.Namespace, Name: j.Name, Check: "UnpackJobFailed",
			Problem: fmt.Sprintf("bundle unpack Job of %s failed: OLM before v0.43 reuses the failed Job and never unpacks the bundle again "+
				"(OLM issue #2265)", configMapOf(j)),
			Evidence: fmt.Sprintf("Job condition Failed=True, %s: %s", cond.Reason, cond.Message),
			Fix:      "delete the Job and its ConfigMap so OLM unpacks the bundle again: " + cleanup})
	}
	ogOf := map[string]string{}
	for _, g := range ogs {
		ogOf[g.Namespace] = g.Name
	}
	for i := range subs {
		s := &subs[i]
		cond := s.Status.GetCondition(v1alpha1.SubscriptionBundleUnpackFailed)
		if s.DeletionTimestamp != nil || cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != v1alpha1.ReasonBundleUnpackFailed {
			continue
		}
		fix := unpackRetryFix(s.Namespace, ogOf[s.Namespace])
		if cmds := failedJobs[s.Spec.CatalogSourceNamespace]; len(cmds) > 0 {
			fix = "delete the failed unpack Jobs of its catalog's namespace: " + strings.Join(cmds, " && ") + "; then " + fix
		}
		out = append(out, Finding{Class: OLM, Kind: olm.SubscriptionKind, Namespace: s.Namespace, Name: s.Name, Check: "BundleUnpackFailed",
			Problem:  fmt.Sprintf("the bundle for this Subscription could not be unpacked (catalog %s/%s): nothing is installed", s.Spec.CatalogSourceNamespace, s.Spec.CatalogSource),
			Evidence: fmt.Sprintf("Subscription condition BundleUnpackFailed=True, %s: %s", cond.Reason, cond.Message),
			Fix:      fix})
	}
	for i := range plans {
		p := &plans[i]
		evidence := planUnpackFailure(p)
		if p.DeletionTimestamp != nil || p.Status.Phase != v1alpha1.InstallPlanPhaseFailed || evidence == "" {
			continue
		}
		var cleanup []string
		for _, l := range p.Status.BundleLookups {
			if l.CatalogSourceRef != nil && l.Path != "" {
				// The Job may carry olmguard's scoped name: it is found by OLM's label.
				ns, name := l.CatalogSourceRef.Namespace, olm.UnpackName(l.Path)
				cleanup = append(cleanup, fmt.Sprintf("kubectl -n %s delete job -l %s=%s && kubectl -n %s delete configmap %s --ignore-not-found",
					ns, olm.BundleUnpackRefLabel, name, ns, name))
			}
		}
		cleanup = append(cleanup, fmt.Sprintf("kubectl -n %s delete installplan %s", p.Namespace, p.Name))
		out = append(out, Finding{Class: OLM, Kind: olm.InstallPlanKind, Namespace: p.Namespace, Name: p.Name, Check: "InstallPlanUnpackFailed",
			Problem:  "InstallPlan failed unpacking its bundle; OLM does not create another plan while this one stays Failed",
			Evidence: evidence,
			Fix:      "delete the unpack Job, its ConfigMap and the plan, so that the Subscription resolves and OLM unpacks again: " + strings.Join(cleanup, " && ")})
	}
	return out
}

// unpackRetryFix is the OperatorGroup setting that makes OLM v0.26+ retry failed unpacks and
// gives slow image pulls more time.
func unpackRetryFix(ns, og string) string {
	if og == "" {
		og = "<operatorgroup>"
	}
	return fmt.Sprintf("let OLM retry failed unpacks and allow slow pulls more time (OLM v0.26+): kubectl -n %s annotate operatorgroup %s %s=30m %s=10m --overwrite",
		ns, og, olm.BundleUnpackTimeoutAnnotation, olm.BundleUnpackMinRetryIntervalAnnotation)
}

func jobFailed(j *batchv1.Job) *batchv1.JobCondition {
	for i, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return &j.Status.Conditions[i]
		}
	}
	return nil
}

func configMapOf(j *batchv1.Job) string {
	for _, r := range j.OwnerReferences {
		if r.Kind == "ConfigMap" {
			return r.Name
		}
	}
	return ""
}

// planUnpackFailure is the evidence that a Failed plan failed on a bundle unpack: a bundle lookup
// with BundleLookupFailed=True, or an Installed=False condition whose message says so.
func planUnpackFailure(p *v1alpha1.InstallPlan) string {
	for _, l := range p.Status.BundleLookups {
		for _, c := range l.Conditions {
			if c.Type == bundleLookupFailed && c.Status == corev1.ConditionTrue {
				return fmt.Sprintf("bundle lookup %s: %s=True, %s: %s", l.Path, c.Type, c.Reason, c.Message)
			}
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == "Installed" && c.Status == corev1.ConditionFalse && strings.HasPrefix(c.Message, unpackFailedPrefix) {
			return fmt.Sprintf("InstallPlan condition Installed=False, %s: %s", c.Reason, c.Message)
		}
	}
	return ""
}

// CheckCatalogSources finds catalogs whose gRPC connection, as the catalog-operator last observed
// it (status.connectionState.lastObservedState), is not READY, for catalogs older than after: OLM
// resolves nothing from them and their Subscriptions report CatalogSourcesUnhealthy.
func CheckCatalogSources(cats []v1alpha1.CatalogSource, now time.Time, after time.Duration) []Finding {
	var out []Finding
	for i := range cats {
		cs := &cats[i]
		state := ""
		if cs.Status.ConnectionState != nil {
			state = cs.Status.ConnectionState.LastObservedState
		}
		age := now.Sub(cs.CreationTimestamp.Time)
		if cs.DeletionTimestamp != nil || state == "READY" || age < after {
			continue
		}
		evidence := "no status.connectionState: the catalog-operator never connected"
		if st := cs.Status.ConnectionState; st != nil {
			evidence = fmt.Sprintf("status.connectionState.lastObservedState=%s, address %s", st.LastObservedState, st.Address)
			if st.LastConnectTime != nil {
				evidence += ", lastConnect " + st.LastConnectTime.UTC().Format(time.RFC3339)
			}
		}
		if cs.Status.Reason != "" || cs.Status.Message != "" {
			evidence += fmt.Sprintf("; status.reason %s: %s", cs.Status.Reason, cs.Status.Message)
		}
		f := Finding{Class: OLM, Kind: olm.CatalogSourceKind, Namespace: cs.Namespace, Name: cs.Name, Check: "CatalogNotReady",
			Problem:  fmt.Sprintf("catalog not READY %s after its creation: OLM resolves nothing from it", age.Round(time.Second)),
			Evidence: evidence}
		if cs.Spec.Image == "" && cs.Spec.Address != "" {
			f.Fix = fmt.Sprintf("nothing serves the catalog at %s: point it at a running registry, kubectl -n %s patch catalogsource %s --type merge -p '{\"spec\":{\"address\":\"HOST:PORT\"}}', "+
				"or remove it: kubectl -n %s delete catalogsource %s", cs.Spec.Address, cs.Namespace, cs.Name, cs.Namespace, cs.Name)
		} else {
			f.Fix = fmt.Sprintf("see why its registry pod does not serve (image pull, crash, OOM), then fix the image or resources: kubectl -n %s describe pods -l %s=%s",
				cs.Namespace, olm.CatalogSourceLabel, cs.Name)
		}
		out = append(out, f)
	}
	return out
}

// catalogContainerFailure finds, in a catalog pod's container statuses (as the kubelet writes
// them), an OOM kill (current or last termination) or a CrashLoopBackOff.
func catalogContainerFailure(p *corev1.Pod) (check, evidence string, container string) {
	for _, cs := range p.Status.ContainerStatuses {
		last := cs.LastTerminationState.Terminated
		if t := cs.State.Terminated; t != nil && t.Reason == "OOMKilled" {
			last = t
		}
		waiting := ""
		if w := cs.State.Waiting; w != nil {
			waiting = w.Reason
		}
		switch {
		case last != nil && last.Reason == "OOMKilled":
			return "CatalogPodOOMKilled", fmt.Sprintf("container %s: last terminated OOMKilled (exit code %d) at %s, %d restarts, now %s",
				cs.Name, last.ExitCode, last.FinishedAt.UTC().Format(time.RFC3339), cs.RestartCount, containerState(cs)), cs.Name
		case waiting == "CrashLoopBackOff":
			ev := fmt.Sprintf("container %s: waiting CrashLoopBackOff, %d restarts", cs.Name, cs.RestartCount)
			if last != nil {
				ev += fmt.Sprintf(", last terminated %s (exit code %d)", last.Reason, last.ExitCode)
			}
			return "CatalogPodCrashLoop", ev, cs.Name
		}
	}
	return "", "", ""
}

func containerState(cs corev1.ContainerStatus) string {
	switch {
	case cs.State.Waiting != nil:
		return "waiting " + cs.State.Waiting.Reason
	case cs.State.Terminated != nil:
		return "terminated " + cs.State.Terminated.Reason
	case cs.State.Running != nil:
		return "running"
	}
	return "unknown"
}

// APIService is what the packageserver check reads of an APIService (apiregistration.k8s.io/v1).
type APIService struct {
	Name       string
	Service    *APIServiceRef
	Conditions []APIServiceCondition
}

// APIServiceRef is an APIService's spec.service.
type APIServiceRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// APIServiceCondition is one status condition of an APIService.
type APIServiceCondition struct {
	Type               string      `json:"type"`
	Status             string      `json:"status"`
	Reason             string      `json:"reason,omitempty"`
	Message            string      `json:"message,omitempty"`
	LastTransitionTime metav1.Time `json:"lastTransitionTime,omitzero"`
}

// PackageServerAPIService is the aggregated API OLM's packageserver serves PackageManifests by.
const PackageServerAPIService = "v1.packages.operators.coreos.com"

// CheckPackageServer finds the packages API unavailable, as the aggregator reports it (condition
// Available not True): `kubectl get packagemanifests` fails, and so does every console listing
// operators. A cluster without the APIService (OLM without packageserver) gets no finding.
func CheckPackageServer(svc *APIService) []Finding {
	if svc == nil {
		return nil
	}
	var avail *APIServiceCondition
	for i := range svc.Conditions {
		if svc.Conditions[i].Type == "Available" {
			avail = &svc.Conditions[i]
		}
	}
	if avail != nil && avail.Status == string(metav1.ConditionTrue) {
		return nil
	}
	evidence := "no Available condition: the aggregator has not checked it yet"
	if avail != nil {
		evidence = fmt.Sprintf("Available=%s since %s, %s: %s", avail.Status, avail.LastTransitionTime.UTC().Format(time.RFC3339), avail.Reason, avail.Message)
	}
	ns, service := "olm", "packageserver-service"
	if svc.Service != nil {
		ns, service = svc.Service.Namespace, svc.Service.Name
	}
	return []Finding{{Class: OLM, Kind: "APIService", Name: svc.Name, Check: "PackageServerUnavailable",
		Problem:  "the packages API is unavailable: kubectl get packagemanifests fails, and consoles list no operators",
		Evidence: evidence,
		Fix: fmt.Sprintf("see whether packageserver runs and has endpoints, then restart it: kubectl -n %s get csv packageserver; kubectl -n %s get endpoints %s; "+
			"kubectl -n %s rollout restart deployment packageserver", ns, ns, service, ns)}}
}

// catalogPodFailure is the finding on a catalog pod whose registry container was OOMKilled or
// crash-loops.
func catalogPodFailure(p *corev1.Pod, check, evidence, container string) Finding {
	catalog := p.Labels[olm.CatalogSourceLabel]
	f := Finding{Class: OLM, Kind: "Pod", Namespace: p.Namespace, Name: p.Name, Check: check, Evidence: evidence}
	if check == "CatalogPodOOMKilled" {
		f.Problem = fmt.Sprintf("the registry of catalog %s runs out of memory: while it restarts, OLM resolves nothing from it", catalog)
		f.Fix = fmt.Sprintf("give the registry more memory (sets its request and GOMEMLIMIT; check limits: kubectl -n %s get limitrange): "+
			`kubectl -n %s patch catalogsource %s --type merge -p '{"spec":{"grpcPodConfig":{"memoryTarget":"512Mi"}}}'`, p.Namespace, p.Namespace, catalog)
		return f
	}
	f.Problem = fmt.Sprintf("the registry of catalog %s crash-loops: OLM resolves nothing from it", catalog)
	f.Fix = fmt.Sprintf("read why it exits, then fix the catalog image (OLM replaces the pod when spec.image changes): kubectl -n %s logs %s -c %s --previous",
		p.Namespace, p.Name, container)
	return f
}
