package doctor

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/internal/kubectlcmd"
	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/operatorgroups"
	"github.com/olmguard/olmguard/pkg/unpack"
)

// The checks in this file find OLM failures olmguard reports but does not heal (class OLM): each
// finding quotes what OLM (or the kubelet, or the aggregator) wrote as its Evidence.

// subscribedCSVs is the set of namespace/name of the CSVs a Subscription has as
// status.installedCSV or status.currentCSV: those OLM takes for a Subscription's.
func subscribedCSVs(subs []*v1alpha1.Subscription) map[string]bool {
	out := map[string]bool{}
	for _, s := range subs {
		for _, name := range []string{s.Status.InstalledCSV, s.Status.CurrentCSV} {
			if name != "" {
				out[s.Namespace+"/"+name] = true
			}
		}
	}
	return out
}

// CheckBlockingCSVs finds installed CSVs that a Subscription's failed resolution blames and that
// no Subscription references (status.installedCSV or currentCSV): OLM's solver keeps the CSV,
// refuses to install the package again beside it ("constraints not satisfiable ... exists and is
// not referenced by a subscription") and, for this reason, never retries by itself. An uninstall
// that deleted only the Subscription leaves one. now is the value the fix's resync annotations get.
func CheckBlockingCSVs(csvs []CSV, subs []*v1alpha1.Subscription, now time.Time) []Finding {
	present := map[string]*CSV{}
	for i := range csvs {
		present[csvs[i].Namespace+"/"+csvs[i].Name] = &csvs[i]
	}
	referenced := subscribedCSVs(subs)
	blamedBy := map[string][]*v1alpha1.Subscription{}
	var order []string
	for i := range subs {
		s := subs[i]
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
		var names, evidence []string
		cmds := []kubectlcmd.Command{kubectl(c.Namespace, "delete", "csv").Name("", olm.ClusterServiceVersionKind, c.Name)}
		for _, s := range by {
			cond := s.Status.GetCondition(v1alpha1.SubscriptionResolutionFailed)
			names = append(names, s.Name)
			evidence = append(evidence, fmt.Sprintf("Subscription %s: ResolutionFailed=True, %s: %s", s.Name, cond.Reason, cond.Message))
			cmds = append(cmds, resync(s.Namespace, s.Name, now))
		}
		out = append(out, withCommands(Finding{Class: OLM, Kind: olm.ClusterServiceVersionKind, Namespace: c.Namespace, Name: c.Name, Check: "OrphanCSVBlocksResolution",
			Problem: fmt.Sprintf("installed without a Subscription referencing it, it blocks the resolution of Subscription %s; "+
				"OLM does not retry a ConstraintsNotSatisfiable resolution by itself", strings.Join(names, ", ")),
			Evidence: strings.Join(evidence, "; "),
			Fix:      "remove the orphan (its operator stops; CRDs and custom resources stay), then annotate the Subscriptions so that OLM resolves again"},
			cmds...))
	}
	return out
}

// stuckPhases are the CSV phases of an install in progress.
var stuckPhases = []v1alpha1.ClusterServiceVersionPhase{v1alpha1.CSVPhasePending, v1alpha1.CSVPhaseInstallReady, v1alpha1.CSVPhaseInstalling}

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
		case v1alpha1.CSVReasonRequirementsNotMet, v1alpha1.CSVReasonRequirementsUnknown:
			f.Fix = "list what it misses, then create it (OLM retries by itself)"
			f = withCommands(f, kubectl(c.Namespace, "get", "csv").Name("", olm.ClusterServiceVersionKind, c.Name).
				Args("-o", `jsonpath={range .status.requirementStatus[?(@.status!="Present")]}{.kind} {.name}: {.status} {.message}{"\n"}{end}`))
		default: // InstallWaiting, InstallSucceeded in Installing, NeedsReinstall...: the Deployments do not come up
			f.Fix = "see why its Deployments are not available (image, crash, quota, scheduling), then fix that"
			f = withCommands(f, kubectl(c.Namespace, "describe", "deployments").Selector(olm.OwnerLabel, c.Name),
				kubectl(c.Namespace, "get", "events", "--sort-by=.lastTimestamp"))
		}
		out = append(out, f)
	}
	return out
}

// CheckOperatorGroups finds namespaces with more than one OperatorGroup (OLM fails every CSV there
// with TooManyOperatorGroups, OLM PR #669) and namespaces with Subscriptions but no OperatorGroup
// (OLM's CSVs there fail with NoOperatorGroup). csvs supply OLM's failures as evidence.
func CheckOperatorGroups(ogs []olmv1.OperatorGroup, subs []*v1alpha1.Subscription, csvs []v1alpha1.ClusterServiceVersion) []Finding {
	byNS := map[string][]olmv1.OperatorGroup{}
	for i := range ogs {
		byNS[ogs[i].Namespace] = append(byNS[ogs[i].Namespace], ogs[i])
	}
	live := map[string][]string{} // namespace -> its live OperatorGroups, the one to keep first
	for ns, groups := range byNS {
		live[ns] = operatorgroups.OldestFirst(groups)
	}
	failed := map[string][]string{} // namespace/reason -> CSV evidence
	for i := range csvs {
		c := &csvs[i]
		if r, ok := operatorgroups.CSVFailure(c); ok {
			failed[c.Namespace+"/"+string(r)] = append(failed[c.Namespace+"/"+string(r)], fmt.Sprintf("CSV %s: Failed, %s: %s", c.Name, r, c.Status.Message))
		}
	}
	var out []Finding
	for _, ns := range sortedKeys(live) {
		names := live[ns]
		if !operatorgroups.TooMany(len(names)) {
			continue
		}
		extra := names[1:]
		evidence := append([]string{"OperatorGroups " + strings.Join(names, ", ") + " (oldest first)"}, failed[ns+"/"+string(v1alpha1.CSVReasonTooManyOperatorGroups)]...)
		deleteExtra := kubectl(ns, "delete", "operatorgroup")
		for _, name := range extra {
			deleteExtra = deleteExtra.Name("", olm.OperatorGroupKind, name)
		}
		out = append(out, withCommands(Finding{Class: OLM, Kind: olm.OperatorGroupKind, Namespace: ns, Name: extra[len(extra)-1], Check: "TooManyOperatorGroups",
			Problem:  fmt.Sprintf("%d OperatorGroups in one namespace: OLM installs nothing here and fails the installed CSVs (TooManyOperatorGroups)", len(names)),
			Evidence: strings.Join(evidence, "; "),
			Fix:      fmt.Sprintf("keep one OperatorGroup (here the oldest, %s) and delete the others", names[0])},
			deleteExtra))
	}
	subsByNS := map[string][]string{}
	for _, s := range subs {
		if s.DeletionTimestamp == nil {
			subsByNS[s.Namespace] = append(subsByNS[s.Namespace], s.Name)
		}
	}
	for _, ns := range sortedKeys(subsByNS) {
		if !operatorgroups.Missing(len(live[ns])) {
			continue
		}
		evidence := append([]string{"Subscriptions " + strings.Join(subsByNS[ns], ", ") + " and no OperatorGroup"}, failed[ns+"/"+string(v1alpha1.CSVReasonNoOperatorGroup)]...)
		f := Finding{Class: OLM, Kind: "Namespace", Namespace: ns, Name: ns, Check: "NoOperatorGroup",
			Problem:  "Subscriptions but no OperatorGroup: OLM's CSVs here fail with NoOperatorGroup and the operators do not run",
			Evidence: strings.Join(evidence, "; ")}
		if err := kubectlcmd.ValidateName(kubectlcmd.Namespace, ns); err != nil {
			f.Fix = "create one; no manifest or command printed: " + err.Error()
			out = append(out, f)
			continue
		}
		og, _ := json.Marshal(map[string]any{"apiVersion": olm.V1APIVersion, "kind": olm.OperatorGroupKind,
			"metadata": map[string]string{"name": ns, "namespace": ns}, "spec": map[string][]string{"targetNamespaces": {ns}}})
		f.Fix = fmt.Sprintf("create one: save %s in %s (for an operator that supports only AllNamespaces, drop spec.targetNamespaces), then apply it",
			og, operatorGroupFile)
		out = append(out, withCommands(f, kubectl(ns, "apply", "-f", operatorGroupFile)))
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

// CheckUnpackFailures finds failed bundle unpacks, as OLM records them: a failed unpack Job (e.g.
// DeadlineExceeded), a Subscription with BundleUnpackFailed, and an InstallPlan Failed on a bundle
// lookup. Each fix names the cleanup that lets OLM unpack again. A failed Job counts only when it
// is owned by one of OLM's unpack ConfigMaps (unpackConfigMap, pkg/unpack's rule): a tenant's Job
// with a made-up ConfigMap ownerReference is none. ogs give the OperatorGroup to annotate.
func CheckUnpackFailures(jobs []batchv1.Job, unpackConfigMap UnpackConfigMaps, subs []*v1alpha1.Subscription, plans []*v1alpha1.InstallPlan, ogs []olmv1.OperatorGroup) []Finding {
	var out []Finding
	failedJobs := map[string][]kubectlcmd.Command{} // namespace -> cleanup commands
	for i := range jobs {
		j := &jobs[i]
		cond, failed := unpack.Failed(j)
		if !failed || j.DeletionTimestamp != nil {
			continue
		}
		cm := unpackOwner(j, unpackConfigMap)
		if cm == "" {
			continue
		}
		cleanup := kubectl(j.Namespace, "delete").Ref("job", "Job", j.Name).Ref("configmap", "ConfigMap", cm)
		failedJobs[j.Namespace] = append(failedJobs[j.Namespace], cleanup)
		out = append(out, withCommands(Finding{Class: OLM, Kind: "Job", Namespace: j.Namespace, Name: j.Name, Check: "UnpackJobFailed",
			Problem: fmt.Sprintf("bundle unpack Job of %s failed: OLM before v0.43 reuses the failed Job and never unpacks the bundle again "+
				"(OLM issue #2265)", cm),
			Evidence: fmt.Sprintf("Job condition Failed=True, %s: %s", cond.Reason, cond.Message),
			Fix:      "delete the Job and its ConfigMap so OLM unpacks the bundle again"},
			cleanup))
	}
	ogOf := map[string]string{}
	for _, g := range ogs {
		ogOf[g.Namespace] = g.Name
	}
	for i := range subs {
		s := subs[i]
		cond := s.Status.GetCondition(v1alpha1.SubscriptionBundleUnpackFailed)
		if s.DeletionTimestamp != nil || cond == nil || cond.Status != corev1.ConditionTrue || cond.Reason != v1alpha1.ReasonBundleUnpackFailed {
			continue
		}
		fix, retry := unpackRetryFix(s.Namespace, ogOf[s.Namespace])
		cmds := failedJobs[s.Spec.CatalogSourceNamespace]
		if len(cmds) > 0 {
			fix = "delete the failed unpack Jobs of its catalog's namespace; then " + fix
		}
		if retry != nil {
			cmds = append(slices.Clone(cmds), *retry)
		}
		out = append(out, withCommands(Finding{Class: OLM, Kind: olm.SubscriptionKind, Namespace: s.Namespace, Name: s.Name, Check: "BundleUnpackFailed",
			Problem:  fmt.Sprintf("the bundle for this Subscription could not be unpacked (catalog %s/%s): nothing is installed", s.Spec.CatalogSourceNamespace, s.Spec.CatalogSource),
			Evidence: fmt.Sprintf("Subscription condition BundleUnpackFailed=True, %s: %s", cond.Reason, cond.Message),
			Fix:      fix},
			cmds...))
	}
	for i := range plans {
		p := plans[i]
		evidence := planUnpackFailure(p)
		if p.DeletionTimestamp != nil || evidence == "" {
			continue
		}
		var cleanup []kubectlcmd.Command
		for _, l := range p.Status.BundleLookups {
			if l.CatalogSourceRef != nil && l.Path != "" {
				// The Job may carry olmguard's scoped name: it is found by OLM's label.
				ns, name := l.CatalogSourceRef.Namespace, olm.UnpackName(l.Path)
				cleanup = append(cleanup, kubectl(ns, "delete", "job").Selector(olm.BundleUnpackRefLabel, name),
					kubectl(ns, "delete", "configmap").Name("", "ConfigMap", name).Args("--ignore-not-found"))
			}
		}
		cleanup = append(cleanup, kubectl(p.Namespace, "delete", "installplan").Name("", olm.InstallPlanKind, p.Name))
		out = append(out, withCommands(Finding{Class: OLM, Kind: olm.InstallPlanKind, Namespace: p.Namespace, Name: p.Name, Check: "InstallPlanUnpackFailed",
			Problem:  "InstallPlan failed unpacking its bundle; OLM does not create another plan while this one stays Failed",
			Evidence: evidence,
			Fix:      "delete the unpack Job, its ConfigMap and the plan, so that the Subscription resolves and OLM unpacks again"},
			cleanup...))
	}
	return out
}

// unpackRetryFix is the OperatorGroup setting that makes OLM v0.26+ retry failed unpacks and
// gives slow image pulls more time: its prose, and its command when the namespace has an
// OperatorGroup.
func unpackRetryFix(ns, og string) (string, *kubectlcmd.Command) {
	fix := "let OLM retry failed unpacks and allow slow pulls more time (OLM v0.26+): annotate the namespace's OperatorGroup with " +
		olm.BundleUnpackTimeoutAnnotation + "=30m and " + olm.BundleUnpackMinRetryIntervalAnnotation + "=10m"
	if og == "" {
		return fix + " (it has none: create one first)", nil
	}
	cmd := kubectl(ns, "annotate", "operatorgroup").Name("", olm.OperatorGroupKind, og).
		Args(olm.BundleUnpackTimeoutAnnotation+"=30m", olm.BundleUnpackMinRetryIntervalAnnotation+"=10m", "--overwrite")
	return fix, &cmd
}

// planUnpackFailure is the evidence that a plan failed on a bundle unpack (unpack.PlanUnpackFailure),
// "" when it did not.
func planUnpackFailure(p *v1alpha1.InstallPlan) string {
	f, ok := unpack.PlanUnpackFailure(p)
	switch {
	case !ok:
		return ""
	case f.Path != "":
		return fmt.Sprintf("bundle lookup %s: %s=True, %s: %s", f.Path, f.Type, f.Reason, f.Message)
	}
	return fmt.Sprintf("InstallPlan condition %s=False, %s: %s", f.Type, f.Reason, f.Message)
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
		if cs.DeletionTimestamp != nil || state == v1alpha1.ConnectionStateReady || age < after {
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
			f.Fix = fmt.Sprintf("nothing serves the catalog at %s: point it at a running registry (first command, with HOST:PORT replaced), "+
				"or remove it (second command)", cs.Spec.Address)
			f = withCommands(f,
				kubectl(cs.Namespace, "patch", "catalogsource").Name("", olm.CatalogSourceKind, cs.Name).Args("--type", "merge", "-p", `{"spec":{"address":"HOST:PORT"}}`),
				kubectl(cs.Namespace, "delete", "catalogsource").Name("", olm.CatalogSourceKind, cs.Name))
		} else {
			f.Fix = "see why its registry pod does not serve (image pull, crash, OOM), then fix the image or resources"
			f = withCommands(f, kubectl(cs.Namespace, "describe", "pods").Selector(olm.CatalogSourceLabel, cs.Name))
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
	return []Finding{withCommands(Finding{Class: OLM, Kind: "APIService", Name: svc.Name, Check: "PackageServerUnavailable",
		Problem:  "the packages API is unavailable: kubectl get packagemanifests fails, and consoles list no operators",
		Evidence: evidence,
		Fix:      "see whether packageserver runs and has endpoints, then restart it"},
		kubectl(ns, "get", "csv", "packageserver"),
		kubectl(ns, "get", "endpoints").Name("", kubectlcmd.Service, service),
		kubectl(ns, "rollout", "restart", "deployment", "packageserver"))}
}

// catalogPodFailure is the finding on a catalog pod whose registry container was OOMKilled or
// crash-loops.
func catalogPodFailure(p *corev1.Pod, check, evidence, container string) Finding {
	catalog := p.Labels[olm.CatalogSourceLabel]
	f := Finding{Class: OLM, Kind: "Pod", Namespace: p.Namespace, Name: p.Name, Check: check, Evidence: evidence}
	if check == "CatalogPodOOMKilled" {
		f.Problem = fmt.Sprintf("the registry of catalog %s runs out of memory: while it restarts, OLM resolves nothing from it", catalog)
		f.Fix = "give the registry more memory (sets its request and GOMEMLIMIT; first command: check the namespace's limits)"
		return withCommands(f, kubectl(p.Namespace, "get", "limitrange"),
			kubectl(p.Namespace, "patch", "catalogsource").Name("", olm.CatalogSourceKind, catalog).
				Args("--type", "merge", "-p", `{"spec":{"grpcPodConfig":{"memoryTarget":"512Mi"}}}`))
	}
	f.Problem = fmt.Sprintf("the registry of catalog %s crash-loops: OLM resolves nothing from it", catalog)
	f.Fix = "read why it exits, then fix the catalog image (OLM replaces the pod when spec.image changes)"
	return withCommands(f, kubectl(p.Namespace, "logs").Name("", "Pod", p.Name).Name("-c", kubectlcmd.Container, container).Args("--previous"))
}
