package release

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olmguard/olmguard/charts"
)

func TestChartRef(t *testing.T) {
	for repo, want := range map[string]string{
		"ghcr.io/olmguard/olmguard": "ghcr.io/olmguard/charts/olmguard:0.2.0",
		"localhost:5000/olmguard":   "localhost:5000/charts/olmguard:0.2.0",
		"olmguard":                  "charts/olmguard:0.2.0",
	} {
		if got := ChartRef(repo, "v0.2.0"); got != want {
			t.Errorf("ChartRef(%q) = %q, want %q", repo, got, want)
		}
	}
	if got := ChartRef("ghcr.io/olmguard/olmguard", "v0.2.0+build.1"); got != "ghcr.io/olmguard/charts/olmguard:0.2.0_build.1" {
		t.Errorf("a build version is tagged %q, want + as _ (as Helm tags it)", got)
	}
}

// TestChartArtifact: the chart's OCI artifact is what `helm push` uploads: a manifest with Helm's
// config (Chart.yaml's metadata as JSON) and one layer, the packaged chart byte for byte, every
// descriptor matching its blob, named by the chart's version.
func TestChartArtifact(t *testing.T) {
	tgz, out := chartArtifact(t)
	blobs := readLayout(t, out)
	var index struct {
		SchemaVersion int          `json:"schemaVersion"`
		Manifests     []descriptor `json:"manifests"`
	}
	unmarshal(t, blobs["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "0.2.0" {
		t.Fatalf("index.json: %s", blobs["index.json"])
	}
	var m struct {
		SchemaVersion int               `json:"schemaVersion"`
		MediaType     string            `json:"mediaType"`
		Config        descriptor        `json:"config"`
		Layers        []descriptor      `json:"layers"`
		Annotations   map[string]string `json:"annotations"`
	}
	unmarshal(t, checkBlob(t, blobs, index.Manifests[0]), &m)
	if m.SchemaVersion != 2 || m.Config.MediaType != HelmConfigMediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != HelmContentMediaType ||
		m.Annotations["org.opencontainers.image.version"] != "0.2.0" || m.Annotations["org.opencontainers.image.created"] != "2026-09-21T14:13:20Z" {
		t.Fatalf("manifest: %+v", m)
	}
	var cfg struct{ Name, Version, AppVersion, APIVersion string }
	unmarshal(t, checkBlob(t, blobs, m.Config), &cfg)
	if cfg.Name != "olmguard" || cfg.Version != "0.2.0" || cfg.AppVersion != "v0.2.0" || cfg.APIVersion != "v2" {
		t.Errorf("config %+v, want Chart.yaml's metadata", cfg)
	}
	want, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	if string(checkBlob(t, blobs, m.Layers[0])) != string(want) {
		t.Error("the layer is not the packaged chart")
	}
}

// chartArtifact packages the chart as v0.2.0 and writes its OCI artifact: the .tgz and the
// artifact's layout archive.
func chartArtifact(t *testing.T) (tgz, out string) {
	t.Helper()
	dir := t.TempDir()
	tgz, err := charts.Package(dir, "v0.2.0", "ghcr.io/olmguard/olmguard")
	if err != nil {
		t.Fatal(err)
	}
	out = filepath.Join(dir, ChartArtifactArchive("v0.2.0"))
	if err := WriteChartArtifact(tgz, ChartRef("ghcr.io/olmguard/olmguard", "v0.2.0"), time.Unix(1790000000, 0), out); err != nil {
		t.Fatal(err)
	}
	return tgz, out
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

// readLayout reads an OCI layout archive: its files by path.
func readLayout(t *testing.T, archive string) map[string][]byte {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
	var l struct {
		Version string `json:"imageLayoutVersion"`
	}
	if json.Unmarshal(files["oci-layout"], &l) != nil || l.Version != "1.0.0" {
		t.Fatalf("%s: oci-layout %q", archive, files["oci-layout"])
	}
	return files
}

// checkBlob is d's blob, checked against d's digest and size.
func checkBlob(t *testing.T, blobs map[string][]byte, d descriptor) []byte {
	t.Helper()
	b, ok := blobs["blobs/"+strings.Replace(d.Digest, ":", "/", 1)]
	sum := sha256.Sum256(b)
	if !ok || "sha256:"+hex.EncodeToString(sum[:]) != d.Digest || int64(len(b)) != d.Size {
		t.Fatalf("descriptor %+v: blob present %v, sha256:%x, size %d", d, ok, sum, len(b))
	}
	return b
}

func unmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}
