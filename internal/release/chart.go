package release

import (
	"encoding/json"
	"os"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"

	"github.com/olmguard/olmguard/internal/image"
)

// Helm's media types for a chart stored in an OCI registry.
const (
	HelmConfigMediaType  = "application/vnd.cncf.helm.config.v1+json"
	HelmContentMediaType = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
)

// WriteChartArtifact writes the packaged chart tgz as the OCI artifact `helm push` makes (a
// config of Chart.yaml's metadata as JSON, the .tgz as the one layer) in an OCI layout archive
// out whose index.json names it ref.
func WriteChartArtifact(tgz, ref string, created time.Time, out string) error {
	data, err := os.ReadFile(tgz)
	if err != nil {
		return err
	}
	ch, err := loader.Load(tgz)
	if err != nil {
		return err
	}
	config, err := json.Marshal(ch.Metadata)
	if err != nil {
		return err
	}
	return image.WriteArtifactArchive(image.Artifact{
		Config: image.Blob{MediaType: HelmConfigMediaType, Data: config},
		Layers: []image.Blob{{MediaType: HelmContentMediaType, Data: data}},
		Annotations: map[string]string{
			"org.opencontainers.image.title":       ch.Metadata.Name,
			"org.opencontainers.image.version":     ch.Metadata.Version,
			"org.opencontainers.image.description": ch.Metadata.Description,
			"org.opencontainers.image.created":     created.UTC().Format(time.RFC3339),
		},
	}, ref, out)
}
