package release

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var sum = strings.Repeat("ab", 32)

func TestKrewManifest(t *testing.T) {
	sums := map[Platform]string{}
	for _, p := range Platforms {
		sums[p] = sum
	}
	b, err := KrewManifest("v0.2.0", "https://example.com/dl/", sums)
	if err != nil {
		t.Fatal(err)
	}
	var p KrewPlugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		t.Fatal(err)
	}
	if err := ValidateKrew(p); err != nil {
		t.Error(err)
	}
	if p.Name != "olmguard" || len(p.Spec.Platforms) != len(Platforms) {
		t.Fatalf("got %s with %d platforms", p.Name, len(p.Spec.Platforms))
	}
	first := p.Spec.Platforms[0] // sorted: darwin/amd64 first
	if first.URI != "https://example.com/dl/kubectl-olmguard_v0.2.0_darwin_amd64.tar.gz" || first.Bin != "kubectl-olmguard" ||
		first.Selector.MatchLabels["os"] != "darwin" || first.Selector.MatchLabels["arch"] != "amd64" {
		t.Errorf("platform %+v", first)
	}
	// Windows' binary is kubectl-olmguard.exe: krew runs the bin it names.
	last := p.Spec.Platforms[len(p.Spec.Platforms)-1] // sorted: windows/amd64 last
	if last.URI != "https://example.com/dl/kubectl-olmguard_v0.2.0_windows_amd64.tar.gz" || last.Bin != "kubectl-olmguard.exe" ||
		last.Selector.MatchLabels["os"] != "windows" {
		t.Errorf("platform %+v", last)
	}
	if _, err := KrewManifest("latest", "https://example.com", sums); err == nil {
		t.Error("a manifest with version latest was produced")
	}
}

func TestValidateKrew(t *testing.T) {
	valid := func() KrewPlugin {
		return KrewPlugin{
			TypeMeta:   metav1.TypeMeta{APIVersion: KrewAPIVersion, Kind: KrewKind},
			ObjectMeta: metav1.ObjectMeta{Name: "olmguard"},
			Spec: KrewSpec{Version: "v0.2.0", ShortDescription: "one line", Platforms: []KrewPlatform{{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": "linux", "arch": "amd64"}},
				URI:      "https://example.com/a.tar.gz", SHA256: sum, Bin: "kubectl-olmguard",
			}}},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*KrewPlugin)
		want   string
	}{
		{"valid", func(*KrewPlugin) {}, ""},
		{"kind", func(p *KrewPlugin) { p.Kind = "Plugins" }, "apiVersion/kind"},
		{"name", func(p *KrewPlugin) { p.Name = "olm guard" }, "name"},
		{"short description on two lines", func(p *KrewPlugin) { p.Spec.ShortDescription = "a\nb" }, "shortDescription"},
		{"version", func(p *KrewPlugin) { p.Spec.Version = "0.2" }, "version"},
		{"no platforms", func(p *KrewPlugin) { p.Spec.Platforms = nil }, "no platforms"},
		{"uri", func(p *KrewPlugin) { p.Spec.Platforms[0].URI = "" }, "uri"},
		{"sha256 upper case", func(p *KrewPlugin) { p.Spec.Platforms[0].SHA256 = strings.ToUpper(sum) }, "sha256"},
		{"bin", func(p *KrewPlugin) { p.Spec.Platforms[0].Bin = "" }, "bin"},
		{"no selector", func(p *KrewPlugin) { p.Spec.Platforms[0].Selector = nil }, "selector"},
		{"selector key", func(p *KrewPlugin) { p.Spec.Platforms[0].Selector.MatchLabels["distro"] = "x" }, `"distro"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := valid()
			tc.change(&p)
			err := ValidateKrew(p)
			if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ValidateKrew() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
