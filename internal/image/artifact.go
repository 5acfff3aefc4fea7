package image

import (
	"bytes"
	"encoding/json"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Blob is content with its media type: an artifact's config or layer.
type Blob struct {
	MediaType string
	Data      []byte
}

// Artifact is an OCI artifact: an image manifest with a config and layers of any media types
// (e.g. a Helm chart: a config of Chart.yaml's metadata as JSON and the chart's .tgz as its layer).
type Artifact struct {
	Config      Blob
	Layers      []Blob
	Annotations map[string]string // the manifest's
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     types.MediaType   `json:"mediaType"`
	Config        v1.Descriptor     `json:"config"`
	Layers        []v1.Descriptor   `json:"layers"`
	Annotations   map[string]string `json:"annotations,omitempty"`
}

func descriptor(b Blob) (v1.Descriptor, error) {
	h, n, err := v1.SHA256(bytes.NewReader(b.Data))
	return v1.Descriptor{MediaType: types.MediaType(b.MediaType), Digest: h, Size: n}, err
}

// WriteArtifactArchive writes a as a tar of an OCI image layout whose index.json names its
// manifest by name (as WriteArchive does): `oras` and `skopeo` push it as it is.
func WriteArtifactArchive(a Artifact, name, out string) error {
	return writeLayoutArchive(out, func(p layout.Path) error {
		m := manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Annotations: a.Annotations}
		for i, b := range append([]Blob{a.Config}, a.Layers...) {
			d, err := descriptor(b)
			if err != nil {
				return err
			}
			if err := p.WriteBlob(d.Digest, io.NopCloser(bytes.NewReader(b.Data))); err != nil {
				return err
			}
			if i == 0 {
				m.Config = d
			} else {
				m.Layers = append(m.Layers, d)
			}
		}
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		d, err := descriptor(Blob{MediaType: string(types.OCIManifestSchema1), Data: raw})
		if err != nil {
			return err
		}
		if err := p.WriteBlob(d.Digest, io.NopCloser(bytes.NewReader(raw))); err != nil {
			return err
		}
		d.Annotations = refAnnotations(name)
		return p.AppendDescriptor(d)
	})
}
