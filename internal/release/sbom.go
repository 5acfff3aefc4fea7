package release

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
)

// SBOMFile is the release's software bill of materials, SPDX 2.3 JSON.
func SBOMFile(version string) string { return "olmguard-" + version + ".spdx.json" }

// SBOMInput is what the SBOM describes: the image and the build information of each program
// (debug/buildinfo of the shipped binaries, by program name; several binaries of one program, one
// per platform, are merged).
type SBOMInput struct {
	Version   string                        // the release version
	Image     string                        // the image repository
	Namespace string                        // the SPDX document namespace, a unique URI
	Created   time.Time                     // the source's date (SOURCE_DATE_EPOCH, the commit's time)
	Programs  map[string][]*debug.BuildInfo // by program name
}

type spdxDoc struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreation       `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreation struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	Comment          string            `json:"comment,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// purl is the package URL of a Go module version.
func purl(path, version string) string {
	return "pkg:golang/" + path + "@" + strings.ReplaceAll(url.PathEscape(version), "+", "%2B")
}

// h1Hex turns go.sum's "h1:<base64>" (SHA-256 of the module's file hashes) into hex; "" when the
// sum is not an h1 sum.
func h1Hex(sum string) string {
	b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sum, "h1:"))
	if !strings.HasPrefix(sum, "h1:") || err != nil || len(b) != 32 {
		return ""
	}
	return hex.EncodeToString(b)
}

// SBOM is the SPDX 2.3 JSON document of in: the image, which CONTAINS each program, each
// program GENERATED_FROM olmguard's module and DEPENDS_ON every module (and the Go standard
// library) linked into it, one package per module version with its purl and go.sum hash.
func SBOM(in SBOMInput) ([]byte, error) {
	if len(in.Programs) == 0 {
		return nil, fmt.Errorf("an SBOM needs at least one program's build information")
	}
	if in.Created.IsZero() {
		return nil, fmt.Errorf("an SBOM needs a creation time (SOURCE_DATE_EPOCH or the commit's time)")
	}
	doc := spdxDoc{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name: "olmguard-" + in.Version, DocumentNamespace: in.Namespace,
		CreationInfo: spdxCreation{Created: in.Created.UTC().Format(time.RFC3339), Creators: []string{"Organization: olmguard", "Tool: olmguard-dist-" + in.Version}},
	}
	const imageID = "SPDXRef-Image"
	doc.Packages = append(doc.Packages, spdxPackage{
		Name: in.Image, SPDXID: imageID, VersionInfo: in.Version, DownloadLocation: "NOASSERTION", PrimaryPurpose: "CONTAINER",
		ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:oci/" + in.Image[strings.LastIndex(in.Image, "/")+1:] + "?repository_url=" + url.QueryEscape(in.Image) + "&tag=" + url.QueryEscape(in.Version)}},
	})
	doc.Relationships = append(doc.Relationships, spdxRelationship{"SPDXRef-DOCUMENT", "DESCRIBES", imageID})
	modules := map[string]string{} // path@version -> SPDXID
	addModule := func(m *debug.Module, mainModule bool) string {
		path, version, sum := m.Path, m.Version, m.Sum
		comment := ""
		if m.Replace != nil {
			comment = "replaces " + m.Path + " " + m.Version + ";"
			path, version, sum = m.Replace.Path, m.Replace.Version, m.Replace.Sum
		}
		if mainModule {
			version = in.Version
		}
		key := path + "@" + version
		if id, ok := modules[key]; ok {
			return id
		}
		id := fmt.Sprintf("SPDXRef-Module-%d-%s", len(modules), strings.Trim(spdxIDUnsafe.ReplaceAllString(key, "-"), "-"))
		modules[key] = id
		p := spdxPackage{
			Name: path, SPDXID: id, VersionInfo: version, DownloadLocation: "NOASSERTION", PrimaryPurpose: "LIBRARY",
			ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", purl(path, version)}}, Comment: comment,
		}
		if mainModule {
			p.PrimaryPurpose, p.DownloadLocation = "SOURCE", "git+https://github.com/olmguard/olmguard@"+in.Version
		}
		if h := h1Hex(sum); h != "" {
			p.Checksums = []spdxChecksum{{"SHA256", h}}
			p.Comment = strings.TrimSpace(p.Comment + " checksum: go.sum's " + sum + " in hex")
		}
		doc.Packages = append(doc.Packages, p)
		return id
	}
	names := make([]string, 0, len(in.Programs))
	for n := range in.Programs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		id := "SPDXRef-Program-" + spdxIDUnsafe.ReplaceAllString(name, "-")
		doc.Packages = append(doc.Packages, spdxPackage{Name: name, SPDXID: id, VersionInfo: in.Version, DownloadLocation: "NOASSERTION", PrimaryPurpose: "APPLICATION"})
		doc.Relationships = append(doc.Relationships, spdxRelationship{imageID, "CONTAINS", id})
		deps := map[string]bool{}
		for _, bi := range in.Programs[name] {
			main := addModule(&bi.Main, true)
			deps[main+" GENERATED_FROM"] = true
			for _, m := range bi.Deps {
				deps[addModule(m, false)+" DEPENDS_ON"] = true
			}
			std := addModule(&debug.Module{Path: "stdlib", Version: bi.GoVersion}, false)
			deps[std+" DEPENDS_ON"] = true
		}
		keys := make([]string, 0, len(deps))
		for k := range deps {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			related, typ, _ := strings.Cut(k, " ")
			doc.Relationships = append(doc.Relationships, spdxRelationship{id, typ, related})
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

// SourceDate is the time a release's files are dated: SOURCE_DATE_EPOCH when set, else commit's
// committer time in the git repository root.
func SourceDate(root, commit string) (time.Time, error) {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	cmd := exec.Command("git", "show", "-s", "--format=%ct", commit, "--")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return time.Time{}, fmt.Errorf("the time of commit %s (set SOURCE_DATE_EPOCH instead): %w", commit, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("the time of commit %s: %w", commit, err)
	}
	return time.Unix(n, 0).UTC(), nil
}
