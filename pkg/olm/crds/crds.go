// Package crds embeds olmguard's own CustomResourceDefinitions for OLM's kinds, generated from the
// typed views in pkg/olm (structural schemas for the fields olmguard uses, unknown fields kept).
// Tests install them; a real cluster has OLM's own CRDs instead.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var files embed.FS

// Load returns olmguard's own CRDs for Subscription, InstallPlan, ClusterServiceVersion,
// CatalogSource and OperatorGroup.
func Load() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load(files, ".")
}

// LoadDir reads every CRD in a directory of YAML files, such as OLM's published CRDs.
func LoadDir(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return load(os.DirFS(dir), ".")
}

func load(fsys fs.FS, dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		data, err := fs.ReadFile(fsys, filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			continue
		}
		out = append(out, crd)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CustomResourceDefinitions found in %s", dir)
	}
	return out, nil
}
