package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const root = "../.."

// TestDockerfileMatchesBuilder: the Dockerfile users build with Docker declares the image this
// package builds without it: base, user, entrypoint, labels, the binaries and how they are built.
func TestDockerfileMatchesBuilder(t *testing.T) {
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ParseDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Olmguard, d.Spec); diff != "" {
		t.Errorf("the Dockerfile and internal/image disagree (-builder +Dockerfile):\n%s", diff)
	}
	if diff := cmp.Diff(Olmguard.Files(), d.Files); diff != "" {
		t.Errorf("the Dockerfile copies other files (-builder +Dockerfile):\n%s", diff)
	}
}

// TestParseDockerfileSeesChanges: each edit a maintainer could make to one side only is seen.
func TestParseDockerfileSeesChanges(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	dockerfile := string(b)
	for _, tt := range []struct{ name, from, to string }{
		{"user", "USER 65532:65532", "USER 0"},
		{"base", "FROM scratch", "FROM gcr.io/distroless/static-debian12:nonroot"},
		{"entrypoint", `ENTRYPOINT ["/controller"]`, `ENTRYPOINT ["/webhook"]`},
		{"label", `LABEL org.opencontainers.image.title="olmguard"`, `LABEL org.opencontainers.image.title="other"`},
		{"binary", " ./cmd/kubectl-olmguard\n", "\n"},
		{"copied file", " /out/kubectl-olmguard /", " /"},
		{"build flag", "-trimpath ", ""},
		{"new instruction", "USER 65532:65532", "USER 65532:65532\nHEALTHCHECK NONE"},
	} {
		edited := strings.Replace(dockerfile, tt.from, tt.to, 1)
		if edited == dockerfile {
			t.Fatalf("%s: %q is not in the Dockerfile", tt.name, tt.from)
		}
		d, err := ParseDockerfile(strings.NewReader(edited))
		if err == nil && cmp.Equal(Olmguard, d.Spec) && cmp.Equal(Olmguard.Files(), d.Files) {
			t.Errorf("%s: the edited Dockerfile still looks like the builder's image", tt.name)
		}
	}
}

func TestShellWords(t *testing.T) {
	got, err := shellWords(`A=1 go build -ldflags="-s -w" 'x y' "a\"b"`)
	want := []string{"A=1", "go", "build", "-ldflags=-s -w", "x y", `a"b`}
	if err != nil || !cmp.Equal(got, want) {
		t.Errorf("shellWords = %q, %v; want %q", got, err, want)
	}
	if _, err := shellWords(`"open`); err == nil {
		t.Error("an unterminated quote was accepted")
	}
}

// TestArchive: the archive is an OCI image layout naming the image, with one uncompressed layer
// holding the binaries (executable, owned by root) and the declared configuration.
func TestArchive(t *testing.T) {
	bin := t.TempDir()
	for _, f := range Olmguard.Files() {
		if err := os.WriteFile(filepath.Join(bin, filepath.Base(f)), []byte("binary "+f), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	img, err := Image(Olmguard, bin, "arm64")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := WriteArchive(img, "olmguard.local/olmguard:dev", out); err != nil {
		t.Fatal(err)
	}
	m, got := openArchive(t, out)
	if len(m.Manifests) != 1 || m.Manifests[0].Annotations["io.containerd.image.name"] != "olmguard.local/olmguard:dev" ||
		m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "dev" || m.Manifests[0].MediaType != types.OCIManifestSchema1 {
		t.Fatalf("index: %+v", m.Manifests)
	}
	cf, err := got.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != "arm64" || cf.Config.User != Olmguard.User ||
		!cmp.Equal(cf.Config.Entrypoint, Olmguard.Entrypoint) || !cmp.Equal(cf.Config.Labels, Olmguard.Labels) {
		t.Errorf("config: %+v", cf)
	}
	layers, err := got.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("layers: %d, %v", len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCIUncompressedLayer {
		t.Errorf("layer media type %s, want %s", mt, types.OCIUncompressedLayer)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var names []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Mode != 0o755 || h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s: mode %o uid %d gid %d, want 755 0 0", h.Name, h.Mode, h.Uid, h.Gid)
		}
		names = append(names, "/"+h.Name)
	}
	if !cmp.Equal(names, Olmguard.Files()) {
		t.Errorf("layer holds %v, want %v", names, Olmguard.Files())
	}
}

// TestBuild builds the real image and runs each binary from its layer.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles olmguard's three binaries")
	}
	out := filepath.Join(t.TempDir(), "image.tar")
	if err := Build(context.Background(), Olmguard, Options{Root: root, Name: "olmguard.local/olmguard:test", Out: out}); err != nil {
		t.Fatal(err)
	}
	_, img := openArchive(t, out)
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	rootfs := t.TempDir()
	extract(t, rc, rootfs)
	for _, f := range Olmguard.Files() {
		cmd := exec.Command(filepath.Join(rootfs, f), "--help")
		if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "Usage") {
			t.Errorf("%s --help from the image: %v\n%s", f, err, out)
		}
	}
}

// openArchive reads an image archive back: its index and its first image.
func openArchive(t *testing.T, archive string) (*v1.IndexManifest, v1.Image) {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(untar(t, archive))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) == 0 {
		t.Fatalf("index of %s: %v %+v", archive, err, m)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return m, img
}

// untar extracts the archive into a fresh directory.
func untar(t *testing.T, archive string) string {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	extract(t, f, dir)
	return dir
}

func extract(t *testing.T, r io.Reader, dir string) {
	t.Helper()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, os.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBenchmarkReferenceBuiltAsImage: hack/build-ref.sh builds an earlier commit's binaries for a
// benchmark beside today's, which test/procs builds as the image does (Olmguard's environment and
// flags); both sides of a comparison must be built alike.
func TestBenchmarkReferenceBuiltAsImage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "hack", "build-ref.sh"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		_, cmd, ok := strings.Cut(line, "&& ")
		if !ok || !strings.Contains(cmd, "go build") {
			continue
		}
		words, err := shellWords(strings.TrimSuffix(strings.TrimSpace(cmd), ")"))
		if err != nil {
			t.Fatal(err)
		}
		env, flags, _, ok := goBuild(words)
		if !ok {
			continue
		}
		found = true
		if !cmp.Equal(env, Olmguard.BuildEnv) || !cmp.Equal(flags, Olmguard.BuildFlags) {
			t.Errorf("hack/build-ref.sh builds with %q %q, the image with %q %q", env, flags, Olmguard.BuildEnv, Olmguard.BuildFlags)
		}
	}
	if !found {
		t.Error("no go build line found in hack/build-ref.sh")
	}
}
