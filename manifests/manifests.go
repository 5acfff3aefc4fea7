// Package manifests holds olmguard's kustomize manifests (base, overlays, components) and renders
// them in process, as `kubectl apply -k` would: `make deploy` and the manifest tests use it, so
// neither needs a kustomize binary. The YAML is generated from the Helm chart (charts/olmguard)
// by `make manifests`; edit the chart, not these files.
package manifests

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

//go:embed base overlays components
var files embed.FS

// Overlays are the installable variants, by directory name under overlays/.
var Overlays = []string{"self-signed", "cert-manager"}

// DefaultImage is the image the base refers to (name "olmguard" in the Deployments).
const DefaultImage = "ghcr.io/olmguard/olmguard:v0.1.0"

// Render builds an overlay and returns its YAML. image, when not empty, replaces DefaultImage.
// components are extra kustomize components (e.g. "servicemonitor") added to the overlay.
func Render(overlay, image string, components ...string) ([]byte, error) {
	return RenderFS(files, overlay, image, components...)
}

// RenderFS is Render of the kustomize tree (base, overlays, components) at the root of files,
// e.g. a checkout's manifests directory.
func RenderFS(files fs.FS, overlay, image string, components ...string) ([]byte, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := fs.ReadFile(files, p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/"+p, b)
	})
	if err != nil {
		return nil, err
	}
	if _, err := fs.Stat(files, path.Join("overlays", overlay)); err != nil {
		return nil, fmt.Errorf("unknown overlay %q (have %v)", overlay, Overlays)
	}
	// A kustomization on top of the overlay sets the image and adds the components.
	top := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../overlays/" + overlay + "\n"
	if len(components) > 0 {
		top += "components:\n"
		for _, c := range components {
			if _, err := fs.Stat(files, path.Join("components", c)); err != nil {
				return nil, fmt.Errorf("unknown component %q", c)
			}
			top += "  - ../components/" + c + "\n"
		}
	}
	if image != "" {
		name, field, value := splitImage(image)
		base, _, _ := splitImage(DefaultImage) // the base has already renamed "olmguard" to it
		top += "images:\n  - name: " + base + "\n    newName: " + name + "\n"
		if field != "" {
			top += "    " + field + ": " + value + "\n"
		}
	}
	if err := mem.WriteFile("/render/kustomization.yaml", []byte(top)); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/render")
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", overlay, err)
	}
	return res.AsYaml()
}

// Objects renders an overlay into objects, in the order kustomize emits them.
func Objects(overlay, image string, components ...string) ([]*unstructured.Unstructured, error) {
	b, err := Render(overlay, image, components...)
	if err != nil {
		return nil, err
	}
	return Decode(b)
}

// Decode splits a multi-document YAML stream into objects.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// splitImage splits "repo/name:tag" or "repo/name@sha256:..." into the name and the kustomize
// field (newTag or digest) with its value. A registry port is not a tag.
func splitImage(image string) (name, field, value string) {
	if i := strings.Index(image, "@"); i >= 0 {
		return image[:i], "digest", image[i+1:]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], "newTag", image[i+1:]
	}
	return image, "", ""
}
