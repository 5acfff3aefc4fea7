// Package image builds olmguard's container image without a Docker engine: the three static
// binaries in one uncompressed layer on an empty base, written as an OCI image layout archive that
// `ctr images import`, `podman load` and `docker load` accept. The Dockerfile stays for users who
// build with Docker; a test keeps the two in agreement (Spec, ParseDockerfile).
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Spec is what an image declares: the properties the Dockerfile and this builder must agree on.
type Spec struct {
	// Base is the final stage's base image; "scratch" is the only one this builder makes.
	Base string
	// User runs the entrypoint (numeric: there is no /etc/passwd).
	User       string
	Entrypoint []string
	Labels     map[string]string
	// Packages are the Go main packages built into the image root, each as /<last element>.
	Packages []string
	// BuildEnv and BuildFlags are how they are built.
	BuildEnv   []string
	BuildFlags []string
}

// Olmguard is olmguard's image.
var Olmguard = Spec{
	Base:       "scratch",
	User:       "65532:65532",
	Entrypoint: []string{"/controller"},
	Labels: map[string]string{
		"org.opencontainers.image.title":  "olmguard",
		"org.opencontainers.image.source": "https://github.com/olmguard/olmguard",
	},
	Packages:   []string{"./cmd/webhook", "./cmd/controller", "./cmd/kubectl-olmguard"},
	BuildEnv:   []string{"CGO_ENABLED=0"},
	BuildFlags: []string{"-trimpath", "-ldflags=-s -w"},
}

// Files are the paths the packages land at in the image.
func (s Spec) Files() []string {
	out := make([]string, len(s.Packages))
	for i, p := range s.Packages {
		out[i] = "/" + filepath.Base(p)
	}
	return out
}

// Options say what to build and where.
type Options struct {
	// Root is the module's directory.
	Root string
	// Name is the image reference recorded in the archive, e.g. olmguard.local/olmguard:dev.
	Name string
	// Arch is the GOARCH to build for; default runtime.GOARCH.
	Arch string
	// Out is the archive to write.
	Out string
	// Log receives a line per step; nil discards them.
	Log io.Writer
}

// Build compiles spec's packages and writes the image archive.
func Build(ctx context.Context, spec Spec, o Options) error {
	if spec.Base != "scratch" {
		return fmt.Errorf("base %q: this builder makes images from scratch only", spec.Base)
	}
	if o.Arch == "" {
		o.Arch = runtime.GOARCH
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	bin, err := os.MkdirTemp("", "olmguard-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	fmt.Fprintf(o.Log, "building %s for linux/%s\n", strings.Join(spec.Packages, " "), o.Arch)
	args := append(append([]string{"build"}, spec.BuildFlags...), "-o", bin+string(os.PathSeparator))
	cmd := exec.CommandContext(ctx, "go", append(args, spec.Packages...)...)
	cmd.Dir = o.Root
	cmd.Env = append(append(os.Environ(), spec.BuildEnv...), "GOOS=linux", "GOARCH="+o.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %w\n%s", err, out)
	}
	img, err := Image(spec, bin, o.Arch)
	if err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "writing %s as %s\n", o.Out, o.Name)
	return WriteArchive(img, o.Name, o.Out)
}

// Image is spec's image from the binaries in dir (named after the packages).
func Image(spec Spec, dir, arch string) (v1.Image, error) {
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, f := range spec.Files() {
		b, err := os.ReadFile(filepath.Join(dir, filepath.Base(f)))
		if err != nil {
			return nil, err
		}
		// Fixed owner, mode and time: the same binaries give the same layer digest.
		hdr := &tar.Header{Name: strings.TrimPrefix(f, "/"), Mode: 0o755, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.AppendLayers(base, static.NewLayer(layer.Bytes(), types.OCIUncompressedLayer))
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Config.User = spec.User
	cf.Config.Entrypoint = spec.Entrypoint
	cf.Config.Labels = spec.Labels
	return mutate.ConfigFile(img, cf)
}

// WriteArchive writes img as a tar of an OCI image layout, the index naming it name (both the OCI
// ref.name annotation and containerd's image name).
func WriteArchive(img v1.Image, name, out string) error {
	return writeLayoutArchive(out, func(p layout.Path) error {
		return p.AppendImage(img, layout.WithAnnotations(refAnnotations(name)))
	})
}

// writeLayoutArchive writes a tar of an OCI image layout at out, whose content fill adds to the
// empty layout.
func writeLayoutArchive(out string, fill func(layout.Path) error) error {
	dir, err := os.MkdirTemp("", "olmguard-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := fill(p); err != nil {
		return err
	}
	return TarDir(dir, out)
}

// tagColon is the index of the colon before name's tag, or -1 (a registry's port is no tag).
func tagColon(name string) int {
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return i
	}
	return -1
}

// TarDir writes the files under dir into the tar archive out, sorted, with fixed times.
func TarDir(dir, out string) error {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(files)
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, path := range files {
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		if err != nil {
			f.Close()
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: int64(len(b)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			f.Close()
			return err
		}
		if _, err := tw.Write(b); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
