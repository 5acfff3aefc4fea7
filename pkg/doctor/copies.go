package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/olmguard/olmguard/internal/kubectlcmd"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// DefaultCopiedCSVsAbove is how many of OLM's copied CSVs doctor lets pass without a finding. A
// few hundred copies are the feature working as meant (a tenant sees a cluster-wide operator in
// its namespace); on a cluster of 2,000 namespaces ten such operators make 20,000, and each is a
// full CSV that OLM keeps in sync (docs/performance.md, "A cluster of 2,000 namespaces").
const DefaultCopiedCSVsAbove = 1000

// CopiedCSVs is what doctor reads to count OLM's copies without listing them: the copies are the
// largest and most numerous CSVs of such a cluster, and each is its original in another namespace.
type CopiedCSVs struct {
	// Namespaces is how many namespaces the cluster has.
	Namespaces int
	// OLMConfigFound is whether the OLMConfig named "cluster" exists; Disabled is its
	// spec.features.disableCopiedCSVs.
	OLMConfigFound, Disabled bool
}

// CopySource is one operator OLM copies into every namespace, and how many copies that makes.
type CopySource struct {
	Namespace, Name string
	Copies          int
}

// CopySources lists the CSVs OLM copies into every other namespace: each CSV that is not itself a
// copy, not being deleted, in a namespace whose only OperatorGroup targets all namespaces (OLM
// resolves status.namespaces to [""]), with the copies it makes (namespaces - 1). Sorted by
// namespace and name.
func CopySources(csvs []v1alpha1.ClusterServiceVersion, ogs []olmv1.OperatorGroup, namespaces int) []CopySource {
	groups := map[string][]*olmv1.OperatorGroup{}
	for i := range ogs {
		groups[ogs[i].Namespace] = append(groups[ogs[i].Namespace], &ogs[i])
	}
	var out []CopySource
	for i := range csvs {
		c := &csvs[i]
		g := groups[c.Namespace]
		if c.DeletionTimestamp != nil || len(g) != 1 || !g[0].Status.AllNamespaces() ||
			olm.IsCopiedCSV(c.Namespace, c.Labels, c.Annotations, string(c.Status.Reason)) {
			continue
		}
		out = append(out, CopySource{Namespace: c.Namespace, Name: c.Name, Copies: max(namespaces-1, 0)})
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"\x00"+out[i].Name < out[j].Namespace+"\x00"+out[j].Name
	})
	return out
}

// CheckCopiedCSVs reports the copies OLM keeps of operators installed for all namespaces when
// they are more than above and OLMConfig does not turn them off: N operators in M namespaces are
// N x M full CSVs, each carrying its original's annotations (alm-examples alone is often 10 to
// 100 KB), and a change of an original is written to every copy (OCPBUGS-37982, OLM #2701). The
// way out is OLM's own switch; the fix says what it costs (tenants no longer see the operator's
// CSV in their namespaces).
func CheckCopiedCSVs(sources []CopySource, cfg CopiedCSVs, above int) []Finding {
	total := 0
	for _, s := range sources {
		total += s.Copies
	}
	if cfg.Disabled || total <= above {
		return nil
	}
	shown := sources
	if len(shown) > 5 {
		shown = shown[:5]
	}
	names := make([]string, 0, len(shown))
	for _, s := range shown {
		names = append(names, s.Namespace+"/"+s.Name)
	}
	more := ""
	if len(sources) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(sources)-len(shown))
	}
	f := Finding{Class: OLM, Kind: olm.OLMConfigKind, Name: olm.OLMConfigName, Check: "CopiedCSVsMultiply",
		Problem: fmt.Sprintf("OLM keeps about %d copied CSVs: %s installed for all namespaces, each copied into %d namespaces; every copy is a full CSV OLM keeps in sync, and their update loops load the apiserver (OCPBUGS-37982, OLM #2701)",
			total, operatorCount(len(sources)), cfg.Namespaces-1),
		Evidence: fmt.Sprintf("copied: %s%s; OLMConfig %s: %s", strings.Join(names, ", "), more, olm.OLMConfigName, copiesSetting(cfg)),
		Fix: "turn OLM's copies off in OLMConfig (spec.features.disableCopiedCSVs: true, OLM v0.20 and later): OLM deletes them and makes no new ones. " +
			"Tenants then no longer see these operators' CSVs in their own namespaces (consoles that list operators by namespace show them in their install namespace only)"}
	if !cfg.OLMConfigFound {
		f.Fix += "; create the OLMConfig named cluster with that setting (none exists)"
		return []Finding{f}
	}
	return []Finding{withCommands(f, kubectlcmd.New("patch", "olmconfig", olm.OLMConfigName, "--type", "merge",
		"-p", `{"spec":{"features":{"disableCopiedCSVs":true}}}`))}
}

func copiesSetting(cfg CopiedCSVs) string {
	if !cfg.OLMConfigFound {
		return "not found (copies on)"
	}
	return "disableCopiedCSVs is not true (copies on)"
}

// operatorCount is "1 operator" or "n operators".
func operatorCount(n int) string {
	if n == 1 {
		return "1 operator"
	}
	return fmt.Sprintf("%d operators", n)
}
