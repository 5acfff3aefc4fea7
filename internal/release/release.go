// Package release builds olmguard's release artifacts (`make dist`): the three binaries for linux
// and darwin and the kubectl plugin for windows, stamped with the version and commit; the kubectl plugin's archives and the krew plugin
// manifest that points at them; the container image archives, one per architecture and one
// multi-architecture image index (an OCI layout); the rendered manifests; the packaged Helm chart,
// also as an OCI artifact layout; an SPDX SBOM from the binaries' build information; and SHA256SUMS
// over all of it.
package release

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/internal/image"
	"github.com/olmguard/olmguard/manifests"
)

// Platform is one GOOS/GOARCH pair.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are the ones a release ships binaries for: the three programs for linux and darwin,
// the kubectl plugin alone for windows (ProgramsFor).
var Platforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}, {"windows", "amd64"}}

// ParsePlatforms reads "linux/amd64,darwin/arm64".
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, f := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(f), "/")
		if !ok || os == "" || arch == "" {
			return nil, fmt.Errorf("platform %q: want GOOS/GOARCH, e.g. linux/amd64", f)
		}
		out = append(out, Platform{os, arch})
	}
	return out, nil
}

// Options say what to build.
type Options struct {
	Root      string     // the module's directory
	Out       string     // the directory to write (emptied first)
	Version   string     // the release version, a semantic version with a v: v0.2.0
	Commit    string     // the commit built
	Platforms []Platform // default Platforms
	// ImageRepo is the image repository the manifests and the chart name, tagged with Version.
	ImageRepo string
	// DownloadURL is where the release's files are published; the krew manifest's URIs are
	// DownloadURL/<archive>.
	DownloadURL string
	// SourceDate dates what the release records a time in (the SBOM, the chart artifact):
	// SourceDate(Root, Commit) in `make dist`.
	SourceDate time.Time
	Log        io.Writer
}

// semver is the form krew (and Helm) require of a version.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// Validate checks the options a release cannot do without.
func (o Options) Validate() error {
	if !semver.MatchString(o.Version) {
		return fmt.Errorf("version %q is not a semantic version with a leading v (e.g. v0.2.0): krew and Helm need one", o.Version)
	}
	if o.Commit == "" {
		return fmt.Errorf("the commit is empty")
	}
	if last := o.ImageRepo[strings.LastIndex(o.ImageRepo, "/")+1:]; last == "" || strings.ContainsAny(last, ":@") {
		return fmt.Errorf("image repository %q: want a repository without tag or digest", o.ImageRepo)
	}
	if o.SourceDate.IsZero() {
		return fmt.Errorf("the source date is unset (SOURCE_DATE_EPOCH or the commit's time)")
	}
	if !strings.HasPrefix(o.DownloadURL, "https://") {
		return fmt.Errorf("download URL %q: krew needs an https URL", o.DownloadURL)
	}
	return nil
}

// Programs are the binaries built for every platform, by main package.
var Programs = image.Olmguard.Packages

// Plugin is the kubectl plugin's binary name.
const Plugin = "kubectl-olmguard"

// PluginPackage is the kubectl plugin's main package.
const PluginPackage = "./cmd/kubectl-olmguard"

// ProgramsFor are the main packages built for p: every program, or on windows the kubectl plugin
// only (the webhook and the controller run in linux containers; a Windows user runs the plugin).
func ProgramsFor(p Platform) []string {
	if p.OS == "windows" {
		return []string{PluginPackage}
	}
	return Programs
}

// PluginBinary is the kubectl plugin's file name on p: kubectl-olmguard, kubectl-olmguard.exe on
// windows.
func PluginBinary(p Platform) string {
	if p.OS == "windows" {
		return Plugin + ".exe"
	}
	return Plugin
}

// Build writes the release into o.Out.
func Build(ctx context.Context, o Options) error {
	if len(o.Platforms) == 0 {
		o.Platforms = Platforms
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := o.Validate(); err != nil {
		return err
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return err
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return err
	}
	pluginSums := map[Platform]string{}
	images := map[string]v1.Image{}
	programs := map[string][]*debug.BuildInfo{}
	for _, p := range o.Platforms {
		dir := filepath.Join(o.Out, "bin", p.OS+"-"+p.Arch)
		fmt.Fprintf(o.Log, "building %s for %s\n", strings.Join(ProgramsFor(p), " "), p)
		if err := buildBinaries(ctx, o, p, dir); err != nil {
			return err
		}
		archive := PluginArchive(o.Version, p)
		sum, err := tarGz(filepath.Join(o.Out, archive), dir, PluginBinary(p))
		if err != nil {
			return err
		}
		pluginSums[p] = sum
		if err := readBuildInfo(dir, programs); err != nil {
			return err
		}
		if p.OS == "linux" {
			name := o.ImageRepo + ":" + o.Version
			out := filepath.Join(o.Out, fmt.Sprintf("olmguard-image_%s_linux_%s.tar", o.Version, p.Arch))
			fmt.Fprintf(o.Log, "writing image %s for linux/%s\n", name, p.Arch)
			img, err := image.Image(image.Olmguard, dir, p.Arch)
			if err == nil {
				err = image.WriteArchive(img, name, out)
			}
			if err != nil {
				return fmt.Errorf("image for %s: %w", p, err)
			}
			images[p.Arch] = img
		}
	}
	if len(images) > 0 {
		name := o.ImageRepo + ":" + o.Version
		fmt.Fprintf(o.Log, "writing the image index %s for %d linux architecture(s)\n", name, len(images))
		idx, err := image.Index(images)
		if err == nil {
			err = image.WriteIndexArchive(idx, name, filepath.Join(o.Out, ImageIndexArchive(o.Version)))
		}
		if err != nil {
			return fmt.Errorf("image index: %w", err)
		}
	}
	fmt.Fprintln(o.Log, "writing the SBOM")
	sbom, err := SBOM(SBOMInput{
		Version: o.Version, Image: o.ImageRepo, Created: o.SourceDate, Programs: programs,
		Namespace: strings.TrimSuffix(o.DownloadURL, "/") + "/" + SBOMFile(o.Version) + "#" + o.Commit,
	})
	if err != nil {
		return err
	}
	if err := write(filepath.Join(o.Out, SBOMFile(o.Version)), sbom); err != nil {
		return err
	}
	for _, overlay := range manifests.Overlays {
		b, err := manifests.Render(overlay, o.ImageRepo+":"+o.Version)
		if err != nil {
			return err
		}
		if err := write(filepath.Join(o.Out, "manifests", "olmguard-"+overlay+".yaml"), b); err != nil {
			return err
		}
	}
	fmt.Fprintln(o.Log, "packaging the Helm chart")
	if p, err := charts.Package(o.Out, o.Version, o.ImageRepo); err != nil {
		return fmt.Errorf("helm chart: %w", err)
	} else if filepath.Base(p) != ChartArchive(o.Version) {
		return fmt.Errorf("helm chart written as %s, want %s", p, ChartArchive(o.Version))
	}
	fmt.Fprintf(o.Log, "writing the Helm chart as an OCI artifact %s\n", ChartRef(o.ImageRepo, o.Version))
	if err := WriteChartArtifact(filepath.Join(o.Out, ChartArchive(o.Version)), ChartRef(o.ImageRepo, o.Version), o.SourceDate, filepath.Join(o.Out, ChartArtifactArchive(o.Version))); err != nil {
		return fmt.Errorf("helm chart artifact: %w", err)
	}
	krew, err := KrewManifest(o.Version, o.DownloadURL, pluginSums)
	if err != nil {
		return err
	}
	if err := write(filepath.Join(o.Out, "krew", "olmguard.yaml"), krew); err != nil {
		return err
	}
	fmt.Fprintln(o.Log, "writing SHA256SUMS")
	return WriteChecksums(o.Out)
}

// ChartArchive is the name of the packaged Helm chart of version (Helm's: no "v").
func ChartArchive(version string) string {
	return charts.Name + "-" + strings.TrimPrefix(version, "v") + ".tgz"
}

// ImageIndexArchive is the name of the multi-architecture image's OCI layout archive.
func ImageIndexArchive(version string) string { return "olmguard-image-" + version + ".oci.tar" }

// ChartArtifactArchive is the name of the Helm chart's OCI artifact layout archive.
func ChartArtifactArchive(version string) string {
	return charts.Name + "-chart-" + strings.TrimPrefix(version, "v") + ".oci.tar"
}

// ChartRef is where the chart is pushed beside the image repository imageRepo
// (ghcr.io/olmguard/olmguard: ghcr.io/olmguard/charts/olmguard), tagged as Helm tags a chart
// version (no v; "+" as "_").
func ChartRef(imageRepo, version string) string {
	dir := path.Dir(imageRepo)
	if dir == "." {
		dir = ""
	} else {
		dir += "/"
	}
	return dir + "charts/" + charts.Name + ":" + strings.ReplaceAll(strings.TrimPrefix(version, "v"), "+", "_")
}

// readBuildInfo adds the build information of each binary in dir to programs, by program name.
func readBuildInfo(dir string, programs map[string][]*debug.BuildInfo) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		bi, err := buildinfo.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return fmt.Errorf("build information of %s: %w", e.Name(), err)
		}
		name := strings.TrimSuffix(e.Name(), ".exe")
		programs[name] = append(programs[name], bi)
	}
	return nil
}

// PluginArchive is the name of the kubectl plugin's archive for p.
func PluginArchive(version string, p Platform) string {
	return fmt.Sprintf("%s_%s_%s_%s.tar.gz", Plugin, version, p.OS, p.Arch)
}

// LDFlags stamp the version and commit into every binary (internal/version) and strip debug
// information, as the image's build does.
func LDFlags(version, commit string) string {
	const pkg = "github.com/olmguard/olmguard/internal/version"
	return fmt.Sprintf("-s -w -X %s.version=%s -X %s.commit=%s", pkg, version, pkg, commit)
}

func buildBinaries(ctx context.Context, o Options, p Platform, dir string) error {
	args := []string{"build", "-trimpath", "-ldflags=" + LDFlags(o.Version, o.Commit), "-o", dir + string(os.PathSeparator)}
	cmd := exec.CommandContext(ctx, "go", append(args, ProgramsFor(p)...)...)
	cmd.Dir = o.Root
	cmd.Env = append(append(os.Environ(), image.Olmguard.BuildEnv...), "GOOS="+p.OS, "GOARCH="+p.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build for %s: %w\n%s", p, err, out)
	}
	return nil
}

// tarGz writes an archive of dir's files names at path and returns its SHA-256.
func tarGz(path, dir string, names ...string) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h))
	tw := tar.NewWriter(gz)
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "", err
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return "", err
		}
		if _, err := tw.Write(b); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), f.Close()
}

func write(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// ChecksumsFile lists every other file of a release with its SHA-256, as `sha256sum -c` reads it.
const ChecksumsFile = "SHA256SUMS"

// WriteChecksums writes ChecksumsFile for every file under dir.
func WriteChecksums(dir string) error {
	var lines []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == ChecksumsFile {
			return err
		}
		sum, err := fileSHA256(path)
		if err != nil {
			return err
		}
		lines = append(lines, sum+"  "+filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(lines)
	return os.WriteFile(filepath.Join(dir, ChecksumsFile), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
