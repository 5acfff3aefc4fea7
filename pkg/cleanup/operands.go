package cleanup

import (
	"strings"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// InstalledAlongsideAnnotationPrefix starts the annotations OLM's catalog-operator writes on every
// CRD it creates or updates for an InstallPlan step: the value is <namespace>/<name> of the CSV
// the step resolves (catalog/step.go NewCRDV1Step calls setInstalledAlongsideAnnotation; package
// internal/alongside; since v0.18, still in v0.46). On an update OLM keeps the references to CSVs
// that still exist, so the CRD names every live CSV it was installed for.
const InstalledAlongsideAnnotationPrefix = "operatorframework.io/installed-alongside-"

// appliedStepStatus are the step statuses once OLM has applied a CRD step: Created (and
// WaitingForAPI until it is established) for a CRD it created, Present for one that existed and
// that it updated.
var appliedStepStatus = map[string]bool{"Created": true, "WaitingForAPI": true, "Present": true}

// PlanCRDs adds to crds the CRDs an InstallPlan shows OLM applied for the CSV named csv: steps of
// kind CustomResourceDefinition (group apiextensions.k8s.io) resolving exactly that CSV, in a
// status OLM writes once it applied the step. The plan must be of the CSV's namespace; its status
// is written by the catalog-operator only (a tenant needs installplans/status to forge it). The
// resolver puts the owned CRDs of every bundle it installs, upgrades included, into that bundle's
// own plan (NewStepResourceFromBundle), so the CSV's own name is enough: another version's step
// is not evidence for this one.
func PlanCRDs(plan *v1alpha1.InstallPlan, csv string, crds map[string]bool) {
	for _, st := range plan.Status.Plan {
		if st == nil || st.Resolving != csv || st.Resource.Kind != "CustomResourceDefinition" || st.Resource.Group != "apiextensions.k8s.io" {
			continue
		}
		if appliedStepStatus[st.Status] && st.Resource.Name != "" {
			crds[st.Resource.Name] = true
		}
	}
}

// OLMInstalledCRD reports whether OLM's own objects show that it installed the CRD named crd for
// the CSV namespace/name: an InstallPlan step (fromPlans, filled by PlanCRDs), or OLM's
// installed-alongside annotation on the CRD naming that CSV. A CRD is cluster-scoped: only cluster
// admins and OLM write its annotations. The CSV's own spec.customresourcedefinitions.owned is a
// claim anyone who may create a CSV can write, never evidence: without OLM's, an uninstall deletes
// no custom resource of that kind.
func OLMInstalledCRD(crd string, crdAnnotations map[string]string, namespace, name string, fromPlans map[string]bool) bool {
	if fromPlans[crd] {
		return true
	}
	want := namespace + "/" + name
	for k, v := range crdAnnotations {
		if strings.HasPrefix(k, InstalledAlongsideAnnotationPrefix) && v == want {
			return true
		}
	}
	return false
}
