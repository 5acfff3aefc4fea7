// Package realolm holds the scenarios of olmguard's real-OLM tier: OLM's own olm-operator and
// catalog-operator (see ../shared/olm) run against a local kwok cluster, with operator bundles
// generated here, and the failures and fixes replayed on them. The tier's tests
// (test/realolm/tier), make demo and the hostile-tenant and real-node tiers use them.
package realolm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/olmsim"
)

// Package is a test operator: one channel "stable" with the given versions in order, each
// replacing the one before. Each bundle owns the CRD <plural>.<package>.example.com (kind
// Widget) and ships a bundled ClusterRole, as many real operators do (OLM #2985).
type Package struct {
	Name     string
	Versions []string // e.g. 1.0.0, 2.0.0
	// CleanupEnabled sets the CSVs' spec.cleanup.enabled: OLM's own opt-in for operand deletion
	// on uninstall, which OLM never implemented and olmguard honours.
	CleanupEnabled bool
	// ClusterRules, when set, are the cluster-wide permissions its CSVs ask for
	// (spec.install.spec.clusterPermissions) instead of every verb on its own Widgets.
	ClusterRules []rbacv1.PolicyRule
}

// clusterRules are the rules of the CSVs' clusterPermissions.
func (p Package) clusterRules() []rbacv1.PolicyRule {
	if p.ClusterRules != nil {
		return p.ClusterRules
	}
	return []rbacv1.PolicyRule{{APIGroups: []string{p.Group()}, Resources: []string{"widgets"}, Verbs: []string{"*"}}}
}

// ServiceAccount is the ServiceAccount of the operator's Deployment, which its permissions are
// granted to.
func (p Package) ServiceAccount() string { return p.Name + "-operator" }

// CSVName is the CSV name of version v.
func (p Package) CSVName(v string) string { return p.Name + ".v" + v }

// Image is the bundle image of version v: only a key, nothing is pulled.
func (p Package) Image(v string) string { return "olmguard.test/" + p.Name + "-bundle:v" + v }

// Group is the API group of the package's CRD.
func (p Package) Group() string { return p.Name + ".example.com" }

// CRDName is the name of the package's CRD.
func (p Package) CRDName() string { return "widgets." + p.Group() }

// BundledClusterRole is the name of the ClusterRole the bundle ships as a manifest.
func (p Package) BundledClusterRole() string { return p.Name + "-bundled-reader" }

// SimBundle is version i of the package as test/olmsim serves it: the same names, image, CRD,
// clusterPermissions and bundled ClusterRole.
func (p Package) SimBundle(i int) olmsim.Bundle {
	v := p.Versions[i]
	b := olmsim.Bundle{Package: p.Name, Channel: "stable", CSVName: p.CSVName(v), Version: v, Image: p.Image(v),
		OwnedCRDs:          []v1alpha1.CRDDescription{{Name: p.CRDName(), Version: "v1", Kind: "Widget"}},
		ClusterPermissions: p.clusterRules(),
		BundledClusterRole: p.BundledClusterRole(), CleanupEnabled: p.CleanupEnabled}
	if i > 0 {
		b.Replaces = p.CSVName(p.Versions[i-1])
	}
	return b
}

// WriteCatalog writes each package's bundles under dir/bundles and a file-based catalog of them
// under dir/catalog. It returns the catalog directory and the bundle image -> directory map.
func WriteCatalog(dir string, pkgs ...Package) (string, map[string]string, error) {
	catalog := filepath.Join(dir, "catalog")
	if err := os.MkdirAll(catalog, 0o755); err != nil {
		return "", nil, err
	}
	images := map[string]string{}
	var fbc []any
	for _, p := range pkgs {
		fbc = append(fbc, map[string]any{"schema": "olm.package", "name": p.Name, "defaultChannel": "stable"})
		var entries []map[string]any
		for i, v := range p.Versions {
			e := map[string]any{"name": p.CSVName(v)}
			if i > 0 {
				e["replaces"] = p.CSVName(p.Versions[i-1])
			}
			entries = append(entries, e)
			bdir := filepath.Join(dir, "bundles", p.Name+"-"+v)
			if err := writeBundle(bdir, p, i); err != nil {
				return "", nil, err
			}
			images[p.Image(v)] = bdir
			sim := p.SimBundle(i)
			fbc = append(fbc, map[string]any{"schema": "olm.bundle", "name": p.CSVName(v), "package": p.Name, "image": p.Image(v),
				"properties": sim.Properties()})
		}
		fbc = append(fbc, map[string]any{"schema": "olm.channel", "package": p.Name, "name": "stable", "entries": entries})
	}
	var b strings.Builder
	for _, o := range fbc {
		data, err := json.Marshal(o)
		if err != nil {
			return "", nil, err
		}
		b.Write(data)
		b.WriteString("\n")
	}
	return catalog, images, os.WriteFile(filepath.Join(catalog, "catalog.json"), []byte(b.String()), 0o644)
}

// writeBundle writes a registry+v1 bundle: manifests/ (CSV, CRD, bundled ClusterRole) and
// metadata/annotations.yaml. JSON is valid YAML, so every manifest is written as JSON.
func writeBundle(dir string, p Package, i int) error {
	v := p.Versions[i]
	spec := map[string]any{
		"displayName": p.Name, "version": v, "minKubeVersion": "1.20.0",
		"installModes": []map[string]any{
			{"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
			{"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}},
		"customresourcedefinitions": map[string]any{"owned": []map[string]string{{"name": p.CRDName(), "version": "v1", "kind": "Widget"}}},
		"install": map[string]any{"strategy": "deployment", "spec": map[string]any{
			"clusterPermissions": []map[string]any{{"serviceAccountName": p.ServiceAccount(), "rules": p.clusterRules()}},
			"deployments": []map[string]any{{"name": p.Name + "-operator", "spec": map[string]any{
				"replicas": 1,
				"selector": map[string]any{"matchLabels": map[string]string{"app": p.Name}},
				"template": map[string]any{"metadata": map[string]any{"labels": map[string]string{"app": p.Name}},
					"spec": map[string]any{"serviceAccountName": p.ServiceAccount(),
						"containers": []map[string]any{{"name": "operator", "image": "olmguard.test/" + p.Name + ":v" + v}}}},
			}}},
		}},
	}
	if i > 0 {
		spec["replaces"] = p.CSVName(p.Versions[i-1])
	}
	if p.CleanupEnabled {
		spec["cleanup"] = map[string]any{"enabled": true}
	}
	csv := map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
		"metadata": map[string]any{"name": p.CSVName(v)}, "spec": spec}
	crd := map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": p.CRDName()},
		"spec": map[string]any{"group": p.Group(), "scope": "Namespaced",
			"names": map[string]string{"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
			"versions": []map[string]any{{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}}
	role := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
		"metadata": map[string]any{"name": p.BundledClusterRole()},
		"rules":    []map[string]any{{"apiGroups": []string{p.Group()}, "resources": []string{"widgets"}, "verbs": []string{"get", "list", "watch"}}}}
	files := map[string]any{
		"manifests/" + p.CSVName(v) + ".clusterserviceversion.yaml": csv,
		"manifests/" + p.CRDName() + ".crd.yaml":                    crd,
		"manifests/" + p.BundledClusterRole() + ".clusterrole.yaml": role,
		"metadata/annotations.yaml": map[string]any{"annotations": map[string]string{
			"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
			"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
			"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
			"operators.operatorframework.io.bundle.package.v1":         p.Name,
			"operators.operatorframework.io.bundle.channels.v1":        "stable",
			"operators.operatorframework.io.bundle.channel.default.v1": "stable",
		}},
	}
	for name, obj := range files {
		data, err := json.MarshalIndent(obj, "", "  ")
		if err != nil {
			return err
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("writing bundle %s: %w", path, err)
		}
	}
	return nil
}
