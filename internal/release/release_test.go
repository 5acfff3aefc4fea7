package release

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/test/testbin"
)

func validOptions() Options {
	return Options{Version: "v0.2.0", Commit: "0b7fb59ecec31f4a", ImageRepo: "ghcr.io/olmguard/olmguard", DownloadURL: "https://example.com/v0.2.0", SourceDate: time.Unix(1790000000, 0).UTC()}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*Options)
		want   string
	}{
		{"valid", func(*Options) {}, ""},
		{"pre-release", func(o *Options) { o.Version = "v0.1.0-dev.0b7fb59" }, ""},
		{"registry with a port", func(o *Options) { o.ImageRepo = "localhost:5000/olmguard" }, ""},
		{"no v", func(o *Options) { o.Version = "0.2.0" }, "not a semantic version"},
		{"a commit for a version", func(o *Options) { o.Version = "0b7fb59" }, "not a semantic version"},
		{"no commit", func(o *Options) { o.Commit = "" }, "commit"},
		{"tagged repository", func(o *Options) { o.ImageRepo = "ghcr.io/olmguard/olmguard:v1" }, "without tag"},
		{"plain http", func(o *Options) { o.DownloadURL = "http://example.com" }, "https"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := validOptions()
			tc.change(&o)
			err := o.Validate()
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// A release ships the kubectl plugin for windows/amd64, alone, as kubectl-olmguard.exe.
func TestWindowsPlugin(t *testing.T) {
	win := Platform{"windows", "amd64"}
	if !slices.Contains(Platforms, win) {
		t.Errorf("Platforms %v lack %s", Platforms, win)
	}
	if got := ProgramsFor(win); !slices.Equal(got, []string{"./cmd/kubectl-olmguard"}) {
		t.Errorf("ProgramsFor(%s) = %v", win, got)
	}
	if got := PluginBinary(win); got != "kubectl-olmguard.exe" {
		t.Errorf("PluginBinary(%s) = %q", win, got)
	}
	if got := ProgramsFor(Platform{"linux", "arm64"}); !slices.Equal(got, Programs) || PluginBinary(Platform{"darwin", "arm64"}) != Plugin {
		t.Errorf("linux builds %v", got)
	}
	if !slices.Contains(Programs, PluginPackage) {
		t.Errorf("Programs %v lack %s", Programs, PluginPackage)
	}
}

func TestParsePlatforms(t *testing.T) {
	got, err := ParsePlatforms("linux/amd64, darwin/arm64")
	if err != nil || len(got) != 2 || got[1] != (Platform{"darwin", "arm64"}) {
		t.Errorf("got %v, %v", got, err)
	}
	if _, err := ParsePlatforms("linux"); err == nil {
		t.Error("linux without an arch was accepted")
	}
}

// TestBuild builds a release for this machine's platform and checks what a user gets: every file
// listed in SHA256SUMS with its true sum; each binary answering --version with the stamped
// version and commit; the plugin archive holding the plugin, with the sum the krew manifest names;
// manifests naming the versioned image; the image archive.
func TestBuild(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	host := Platform{runtime.GOOS, runtime.GOARCH}
	o := validOptions()
	o.Version, o.Commit = "v9.9.9-test.1", "feedbeef0123456789"
	o.Root, o.Out, o.Platforms = root, t.TempDir(), []Platform{host}
	if err := Build(context.Background(), o); err != nil {
		t.Fatal(err)
	}

	sums := readChecksums(t, o.Out)
	for _, want := range []string{
		"bin/" + host.OS + "-" + host.Arch + "/controller", "bin/" + host.OS + "-" + host.Arch + "/webhook",
		"bin/" + host.OS + "-" + host.Arch + "/" + Plugin, PluginArchive(o.Version, host), "krew/olmguard.yaml",
		"manifests/olmguard-self-signed.yaml", "manifests/olmguard-cert-manager.yaml", ChartArchive(o.Version),
		ChartArtifactArchive(o.Version), SBOMFile(o.Version),
	} {
		if _, ok := sums[want]; !ok {
			t.Errorf("SHA256SUMS does not list %s", want)
		}
	}
	if host.OS == "linux" {
		if _, ok := sums["olmguard-image_"+o.Version+"_linux_"+host.Arch+".tar"]; !ok {
			t.Errorf("no image archive for linux/%s", host.Arch)
		}
		if _, ok := sums[ImageIndexArchive(o.Version)]; !ok {
			t.Errorf("SHA256SUMS does not list %s", ImageIndexArchive(o.Version))
		}
		// PLATFORMS=linux/<arch>: an image index of one.
		blobs := readLayout(t, filepath.Join(o.Out, ImageIndexArchive(o.Version)))
		var top, idx struct{ Manifests []descriptor }
		unmarshal(t, blobs["index.json"], &top)
		if len(top.Manifests) != 1 || top.Manifests[0].MediaType != "application/vnd.oci.image.index.v1+json" {
			t.Fatalf("index.json: %s", blobs["index.json"])
		}
		unmarshal(t, checkBlob(t, blobs, top.Manifests[0]), &idx)
		if len(idx.Manifests) != 1 || idx.Manifests[0].Platform == nil || idx.Manifests[0].Platform.Architecture != host.Arch {
			t.Errorf("image index: %+v", idx.Manifests)
		}
	}
	for name, sum := range sums {
		got, err := fileSHA256(filepath.Join(o.Out, name))
		if err != nil || got != sum {
			t.Errorf("%s: SHA256SUMS says %s, the file has %s (%v)", name, sum, got, err)
		}
	}

	bin := filepath.Join(o.Out, "bin", host.OS+"-"+host.Arch)
	for _, prog := range []struct{ file, name string }{{"webhook", "olmguard-webhook"}, {"controller", "olmguard-controller"}, {Plugin, Plugin}} {
		out, err := exec.Command(filepath.Join(bin, prog.file), "--version").CombinedOutput()
		want := prog.name + " v9.9.9-test.1 (commit feedbeef0123, "
		if err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("%s --version: %q (%v), want it to start with %q", prog.file, out, err, want)
		}
	}

	var krew KrewPlugin
	b, err := os.ReadFile(filepath.Join(o.Out, "krew", "olmguard.yaml"))
	if err == nil {
		err = yaml.UnmarshalStrict(b, &krew)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateKrew(krew); err != nil {
		t.Error(err)
	}
	if len(krew.Spec.Platforms) != 1 || krew.Spec.Platforms[0].SHA256 != sums[PluginArchive(o.Version, host)] ||
		krew.Spec.Platforms[0].URI != o.DownloadURL+"/"+PluginArchive(o.Version, host) {
		t.Errorf("the krew manifest does not name the archive with its sum: %+v", krew.Spec.Platforms)
	}
	if got := archiveNames(t, filepath.Join(o.Out, PluginArchive(o.Version, host))); len(got) != 1 || got[0] != krew.Spec.Platforms[0].Bin {
		t.Errorf("the plugin archive holds %v, want just %s", got, krew.Spec.Platforms[0].Bin)
	}

	m, err := os.ReadFile(filepath.Join(o.Out, "manifests", "olmguard-self-signed.yaml"))
	if err != nil || !strings.Contains(string(m), "image: ghcr.io/olmguard/olmguard:v9.9.9-test.1") {
		t.Errorf("the rendered manifests do not name the release's image (%v)", err)
	}

	sbom, err := os.ReadFile(filepath.Join(o.Out, SBOMFile(o.Version)))
	if err != nil {
		t.Fatal(err)
	}
	sbomLists(t, root, sbom)

	ch, err := loader.Load(filepath.Join(o.Out, ChartArchive(o.Version)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := charts.Render(ch, charts.Options{})
	if err != nil || ch.Metadata.Version != "9.9.9-test.1" || ch.Metadata.AppVersion != o.Version ||
		!strings.Contains(string(c), "image: ghcr.io/olmguard/olmguard:v9.9.9-test.1") {
		t.Errorf("the packaged chart %+v does not render the release's image (%v)", ch.Metadata, err)
	}
}

// sbomLists checks that the release's SBOM names the modules go.mod requires that are linked into
// the binaries, at go.mod's versions.
func sbomLists(t *testing.T, root string, sbom []byte) {
	t.Helper()
	doc := parseSPDX(t, sbom)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]string{}
	for _, p := range doc.Packages {
		listed[p.Name] = p.VersionInfo
	}
	for _, mod := range []string{"k8s.io/client-go", "sigs.k8s.io/controller-runtime", "k8s.io/apimachinery"} {
		m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(mod) + ` (v\S+)`).FindSubmatch(gomod)
		if m == nil {
			t.Fatalf("go.mod does not require %s", mod)
		}
		if listed[mod] != string(m[1]) {
			t.Errorf("SBOM lists %s at %q, go.mod requires %s", mod, listed[mod], m[1])
		}
	}
}

func readChecksums(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, ChecksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sums := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		sum, name, ok := strings.Cut(sc.Text(), "  ")
		if !ok {
			t.Fatalf("SHA256SUMS line %q is not `<sum>  <file>`", sc.Text())
		}
		sums[name] = sum
	}
	return sums
}

func archiveNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		names = append(names, h.Name)
	}
	return names
}
