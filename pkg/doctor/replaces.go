package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/replaces"
)

// olmOperatorRestart says where the restart of the fix runs: OLM's namespace is not read.
const olmOperatorRestart = "restart olm-operator: kubectl rollout restart deployment/olm-operator in OLM's namespace (olm upstream, openshift-operator-lifecycle-manager on OpenShift)"

// CheckReplacesCycles finds, per namespace, the CSVs whose spec.replaces chains form a cycle
// (replaces.Cycles; OLM's copies left out as OLM's walk leaves them). Where olm-operator reports
// ClusterOperator status (OpenShift), a CSV of such a cycle carrying olm.clusteroperator.name
// spins one of its CSV workers at 100 % CPU until it restarts, and deleting the CSV does not stop
// it (OCPBUGS-23954, fixed upstream after v0.46.0 in no release). Elsewhere such a CSV only waits
// forever for the CSV it replaces. One finding per cycle, on its least-named CSV.
func CheckReplacesCycles(csvs []v1alpha1.ClusterServiceVersion) []Finding {
	byNS := map[string]map[string]string{}
	labelled := map[string]string{} // namespace/name -> olm.clusteroperator.name
	for i := range csvs {
		c := &csvs[i]
		if olm.IsCopiedCSV(c.Namespace, c.Labels, c.Annotations, string(c.Status.Reason)) {
			continue
		}
		if byNS[c.Namespace] == nil {
			byNS[c.Namespace] = map[string]string{}
		}
		byNS[c.Namespace][c.Name] = c.Spec.Replaces
		if v, ok := c.Labels[olm.ClusterOperatorNameLabel]; ok {
			labelled[c.Namespace+"/"+c.Name] = v
		}
	}
	var out []Finding
	for _, ns := range sortedKeys(byNS) {
		for _, cycle := range replaces.Cycles(byNS[ns]) {
			var marked []string
			for _, name := range cycle {
				if v, ok := labelled[ns+"/"+name]; ok {
					marked = append(marked, fmt.Sprintf("%s (%s=%s)", name, olm.ClusterOperatorNameLabel, v))
				}
			}
			sort.Strings(marked)
			evidence := "spec.replaces: " + replaces.Describe(cycle) + "; "
			if len(marked) > 0 {
				evidence += "labelled for ClusterOperator status, so olm-operator loops on them where it reports it: " + strings.Join(marked, ", ")
			} else {
				evidence += fmt.Sprintf("none labelled %s: olm-operator loops only once one is, and the CSVs wait for themselves", olm.ClusterOperatorNameLabel)
			}
			problem := "CSV replaces itself"
			if len(cycle) > 1 {
				problem = fmt.Sprintf("%d CSVs replace each other in a cycle", len(cycle))
			}
			f := Finding{Class: OLM, Kind: olm.ClusterServiceVersionKind, Namespace: ns, Name: cycle[0], Check: "ReplacesCycle",
				Problem: problem + ": olm-operator, where it reports ClusterOperator status (OpenShift), loops at 100% CPU on them until it restarts, " +
					"and deleting the CSV does not stop it (" + replaces.Reference + ")",
				Evidence: evidence,
				Fix:      "break the cycle: remove spec.replaces of " + cycle[0] + " (or set it to the CSV it really replaces), or delete the CSV; then " + olmOperatorRestart}
			out = append(out, withCommands(f, kubectl(ns, "patch", "csv").Name("", olm.ClusterServiceVersionKind, cycle[0]).
				Args("--type=json", `-p=[{"op":"remove","path":"/spec/replaces"}]`)))
		}
	}
	return out
}
