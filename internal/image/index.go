package image

import (
	"fmt"
	"sort"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Index is the multi-architecture image index of images (by GOARCH, all linux): one OCI image
// manifest per architecture, each descriptor carrying its platform, in architecture order.
func Index(images map[string]v1.Image) (v1.ImageIndex, error) {
	if len(images) == 0 {
		return nil, fmt.Errorf("an image index needs at least one image")
	}
	arches := make([]string, 0, len(images))
	for a := range images {
		arches = append(arches, a)
	}
	sort.Strings(arches)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, a := range arches {
		img := images[a]
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		if cf.OS != "linux" || cf.Architecture != a {
			return nil, fmt.Errorf("image for %s is configured for %s/%s", a, cf.OS, cf.Architecture)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: a}},
		})
	}
	return idx, nil
}

// WriteIndexArchive writes idx as a tar of an OCI image layout whose index.json names one image
// index (name as for WriteArchive), its manifests' blobs stored once by digest:
// `skopeo copy --all oci-archive:<out> docker://<name>` pushes every architecture.
func WriteIndexArchive(idx v1.ImageIndex, name, out string) error {
	return writeLayoutArchive(out, func(p layout.Path) error {
		return p.AppendIndex(idx, layout.WithAnnotations(refAnnotations(name)))
	})
}

// refAnnotations name an image in an OCI layout's index.json: the tag as the OCI ref.name (what
// `oci-archive:<file>:<tag>` selects) and the whole reference as containerd's image name.
func refAnnotations(name string) map[string]string {
	tag := name
	if i := tagColon(name); i >= 0 {
		tag = name[i+1:]
	}
	return map[string]string{
		"org.opencontainers.image.ref.name": tag,
		"io.containerd.image.name":          name,
	}
}
