package release

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The krew plugin manifest: the fields krew's index reads, in krew's own spelling. (krew's Go
// module is not imported: it pins a client-go that would replace the one olmguard uses.)
const (
	KrewAPIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	KrewKind       = "Plugin"
	// KrewName is the plugin's name in krew: `kubectl krew install olmguard`, `kubectl olmguard`.
	KrewName = "olmguard"
)

// KrewPlugin is a krew plugin manifest.
type KrewPlugin struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              KrewSpec `json:"spec"`
}

// KrewSpec is the plugin's description and where to download it per platform.
type KrewSpec struct {
	Version          string         `json:"version"`
	Homepage         string         `json:"homepage,omitempty"`
	ShortDescription string         `json:"shortDescription"`
	Description      string         `json:"description,omitempty"`
	Caveats          string         `json:"caveats,omitempty"`
	Platforms        []KrewPlatform `json:"platforms"`
}

// KrewPlatform is one platform's archive.
type KrewPlatform struct {
	Selector *metav1.LabelSelector `json:"selector"`
	URI      string                `json:"uri"`
	SHA256   string                `json:"sha256"`
	Bin      string                `json:"bin"`
}

// KrewManifest is the krew manifest of the plugin archives whose SHA-256 sums are given, published
// under downloadURL.
func KrewManifest(version, downloadURL string, sums map[Platform]string) ([]byte, error) {
	p := KrewPlugin{
		TypeMeta:   metav1.TypeMeta{APIVersion: KrewAPIVersion, Kind: KrewKind},
		ObjectMeta: metav1.ObjectMeta{Name: KrewName},
		Spec: KrewSpec{
			Version:          version,
			Homepage:         "https://github.com/olmguard/olmguard",
			ShortDescription: "Audit and safely uninstall olmguard, the OLM v0 reliability webhook",
			Description: "kubectl olmguard doctor audits a cluster running Operator Lifecycle Manager v0 for\n" +
				"the failures olmguard fixes (InstallPlans without owners, leaked RBAC after uninstall,\n" +
				"stuck Subscriptions, invisible unpack Jobs, lost catalog pods) and prints each problem\n" +
				"with the command that fixes it. kubectl olmguard uninstall removes olmguard without\n" +
				"leaving a webhook or finalizer behind.\n",
		},
	}
	platforms := make([]Platform, 0, len(sums))
	for pl := range sums {
		platforms = append(platforms, pl)
	}
	sort.Slice(platforms, func(i, j int) bool { return platforms[i].String() < platforms[j].String() })
	for _, pl := range platforms {
		p.Spec.Platforms = append(p.Spec.Platforms, KrewPlatform{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"os": pl.OS, "arch": pl.Arch}},
			URI:      strings.TrimSuffix(downloadURL, "/") + "/" + PluginArchive(version, pl),
			SHA256:   sums[pl],
			Bin:      PluginBinary(pl),
		})
	}
	if err := ValidateKrew(p); err != nil {
		return nil, err
	}
	return yaml.Marshal(p)
}

var (
	krewSafeName = regexp.MustCompile(`^[\w-]+$`)
	sha256Hex    = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// ValidateKrew checks what krew's index requires of a plugin manifest: its apiVersion and kind,
// a safe name, a one-line short description, a semantic version, and for every platform a
// selector on os and arch only, an https URI, a SHA-256 and the binary's name.
func ValidateKrew(p KrewPlugin) error {
	var errs []error
	if p.APIVersion != KrewAPIVersion || p.Kind != KrewKind {
		errs = append(errs, fmt.Errorf("apiVersion/kind %s/%s, want %s/%s", p.APIVersion, p.Kind, KrewAPIVersion, KrewKind))
	}
	if !krewSafeName.MatchString(p.Name) {
		errs = append(errs, fmt.Errorf("name %q must match %s", p.Name, krewSafeName))
	}
	if p.Spec.ShortDescription == "" || strings.ContainsAny(p.Spec.ShortDescription, "\r\n") {
		errs = append(errs, errors.New("shortDescription must be one non-empty line"))
	}
	if !semver.MatchString(p.Spec.Version) {
		errs = append(errs, fmt.Errorf("version %q is not a semantic version with a leading v", p.Spec.Version))
	}
	if len(p.Spec.Platforms) == 0 {
		errs = append(errs, errors.New("no platforms"))
	}
	for i, pl := range p.Spec.Platforms {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("platforms[%d]: "+format, append([]any{i}, args...)...))
		}
		if !strings.HasPrefix(pl.URI, "https://") {
			bad("uri %q must be https", pl.URI)
		}
		if !sha256Hex.MatchString(pl.SHA256) {
			bad("sha256 %q must be 64 lowercase hex digits", pl.SHA256)
		}
		if pl.Bin == "" {
			bad("bin is empty")
		}
		switch {
		case pl.Selector == nil || len(pl.Selector.MatchLabels) == 0 && len(pl.Selector.MatchExpressions) == 0:
			bad("selector is empty")
		default:
			for k := range pl.Selector.MatchLabels {
				if k != "os" && k != "arch" {
					bad("selector key %q: only os and arch are supported", k)
				}
			}
			for _, e := range pl.Selector.MatchExpressions {
				if e.Key != "os" && e.Key != "arch" {
					bad("selector key %q: only os and arch are supported", e.Key)
				}
			}
		}
	}
	return errors.Join(errs...)
}
