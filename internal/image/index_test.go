package image

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// fakeImage is Olmguard's image for arch with small stand-ins for the binaries (no compiling).
func fakeImage(t *testing.T, arch string) v1.Image {
	t.Helper()
	bin := t.TempDir()
	for _, f := range Olmguard.Files() {
		if err := os.WriteFile(filepath.Join(bin, filepath.Base(f)), []byte(arch+" binary "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, err := Image(Olmguard, bin, arch)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestIndexArchive: the multi-architecture archive is a valid OCI image layout (every descriptor's
// digest and size are its blob's) whose index.json names one image index listing an image per
// architecture with its platform, each configured for that platform.
func TestIndexArchive(t *testing.T) {
	for _, arches := range [][]string{{"amd64", "arm64"}, {"amd64"}} {
		t.Run(strings.Join(arches, "+"), func(t *testing.T) {
			images := map[string]v1.Image{}
			for _, a := range arches {
				images[a] = fakeImage(t, a)
			}
			idx, err := Index(images)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "index.oci.tar")
			if err := WriteIndexArchive(idx, "ghcr.io/olmguard/olmguard:v0.2.0", out); err != nil {
				t.Fatal(err)
			}
			dir := untar(t, out)
			top := CheckLayout(t, dir)
			if len(top.Manifests) != 1 {
				t.Fatalf("index.json lists %d manifests, want one image index", len(top.Manifests))
			}
			d := top.Manifests[0]
			if d.MediaType != "application/vnd.oci.image.index.v1+json" || d.Annotations["org.opencontainers.image.ref.name"] != "v0.2.0" ||
				d.Annotations["io.containerd.image.name"] != "ghcr.io/olmguard/olmguard:v0.2.0" {
				t.Errorf("index.json's descriptor: %+v", d)
			}
			var inner ociIndex
			readJSON(t, dir, d.Digest, &inner)
			if inner.MediaType != "application/vnd.oci.image.index.v1+json" {
				t.Errorf("image index mediaType %q", inner.MediaType)
			}
			var got []string
			for _, m := range inner.Manifests {
				if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || m.Platform == nil {
					t.Fatalf("manifest descriptor %+v", m)
				}
				got = append(got, m.Platform.OS+"/"+m.Platform.Architecture)
				var man ociManifest
				readJSON(t, dir, m.Digest, &man)
				var cfg struct{ OS, Architecture string }
				readJSON(t, dir, man.Config.Digest, &cfg)
				if cfg.OS != m.Platform.OS || cfg.Architecture != m.Platform.Architecture {
					t.Errorf("manifest for %s/%s: config says %s/%s", m.Platform.OS, m.Platform.Architecture, cfg.OS, cfg.Architecture)
				}
			}
			var want []string
			for _, a := range arches {
				want = append(want, "linux/"+a)
			}
			if !cmp.Equal(got, want) {
				t.Errorf("image index lists %v, want %v", got, want)
			}
		})
	}
}

// An image configured for another architecture is refused.
func TestIndexRefusesWrongArchitecture(t *testing.T) {
	if _, err := Index(map[string]v1.Image{"arm64": fakeImage(t, "amd64")}); err == nil {
		t.Error("an amd64 image was indexed as arm64")
	}
	if _, err := Index(nil); err == nil {
		t.Error("an empty index was built")
	}
}

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type ociIndex struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifest struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Config        ociDescriptor   `json:"config"`
	Layers        []ociDescriptor `json:"layers"`
}

// CheckLayout reads the OCI image layout in dir and checks every descriptor reachable from
// index.json: its blob exists with that digest and size; indexes and manifests are followed.
// It returns index.json.
func CheckLayout(t *testing.T, dir string) ociIndex {
	t.Helper()
	var layoutFile struct {
		Version string `json:"imageLayoutVersion"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "oci-layout"))
	if err != nil || json.Unmarshal(b, &layoutFile) != nil || layoutFile.Version != "1.0.0" {
		t.Fatalf("oci-layout: %s %v", b, err)
	}
	var top ociIndex
	b, err = os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil || json.Unmarshal(b, &top) != nil || top.SchemaVersion != 2 {
		t.Fatalf("index.json: %s %v", b, err)
	}
	var check func(d ociDescriptor)
	check = func(d ociDescriptor) {
		b := blob(t, dir, d)
		switch d.MediaType {
		case "application/vnd.oci.image.index.v1+json":
			var idx ociIndex
			if err := json.Unmarshal(b, &idx); err != nil || idx.SchemaVersion != 2 || idx.MediaType != d.MediaType {
				t.Errorf("index %s: %v %s", d.Digest, err, b)
			}
			for _, m := range idx.Manifests {
				check(m)
			}
		case "application/vnd.oci.image.manifest.v1+json":
			var m ociManifest
			if err := json.Unmarshal(b, &m); err != nil || m.SchemaVersion != 2 || m.MediaType != d.MediaType || len(m.Layers) == 0 {
				t.Errorf("manifest %s: %v %s", d.Digest, err, b)
			}
			check(m.Config)
			for _, l := range m.Layers {
				check(l)
			}
		}
	}
	for _, d := range top.Manifests {
		check(d)
	}
	return top
}

// blob is d's blob, checked against d's digest and size.
func blob(t *testing.T, dir string, d ociDescriptor) []byte {
	t.Helper()
	alg, hexsum, ok := strings.Cut(d.Digest, ":")
	if !ok || alg != "sha256" {
		t.Fatalf("descriptor %+v: digest not sha256", d)
	}
	b, err := os.ReadFile(filepath.Join(dir, "blobs", alg, hexsum))
	if err != nil {
		t.Fatalf("blob of %+v: %v", d, err)
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexsum || int64(len(b)) != d.Size {
		t.Errorf("descriptor %s %s size %d: blob has sha256:%x size %d", d.MediaType, d.Digest, d.Size, sum, len(b))
	}
	return b
}

func readJSON(t *testing.T, dir, digest string, v any) {
	t.Helper()
	_, hexsum, _ := strings.Cut(digest, ":")
	b, err := os.ReadFile(filepath.Join(dir, "blobs", "sha256", hexsum))
	if err != nil || json.Unmarshal(b, v) != nil {
		t.Fatalf("blob %s: %v %s", digest, err, b)
	}
}

// TestArtifactArchive: an artifact's layout holds its manifest, named, with its config and layer
// blobs of the given media types, every descriptor matching its blob.
func TestArtifactArchive(t *testing.T) {
	a := Artifact{
		Config:      Blob{MediaType: "application/vnd.example.config.v1+json", Data: []byte(`{"name":"x"}`)},
		Layers:      []Blob{{MediaType: "application/vnd.example.content.v1.tar+gzip", Data: []byte("content")}},
		Annotations: map[string]string{"org.opencontainers.image.title": "x"},
	}
	out := filepath.Join(t.TempDir(), "artifact.oci.tar")
	if err := WriteArtifactArchive(a, "ghcr.io/olmguard/charts/x:1.0.0", out); err != nil {
		t.Fatal(err)
	}
	dir := untar(t, out)
	top := CheckLayout(t, dir)
	if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.manifest.v1+json" ||
		top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "1.0.0" {
		t.Fatalf("index.json: %+v", top.Manifests)
	}
	var m struct {
		ociManifest
		Annotations map[string]string `json:"annotations"`
	}
	readJSON(t, dir, top.Manifests[0].Digest, &m)
	if m.Config.MediaType != a.Config.MediaType || len(m.Layers) != 1 || m.Layers[0].MediaType != a.Layers[0].MediaType ||
		m.Annotations["org.opencontainers.image.title"] != "x" {
		t.Errorf("manifest: %+v", m)
	}
	if got := string(blob(t, dir, m.Layers[0])); got != "content" {
		t.Errorf("layer holds %q", got)
	}
}
