package release

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func sbomInput() SBOMInput {
	main := debug.Module{Path: "github.com/olmguard/olmguard", Version: "(devel)"}
	clientGo := &debug.Module{Path: "k8s.io/client-go", Version: "v0.36.3", Sum: "h1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}
	replaced := &debug.Module{Path: "example.com/old", Version: "v1.0.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v1.0.1+incompatible", Sum: "h1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}}
	return SBOMInput{
		Version: "v0.2.0", Image: "ghcr.io/olmguard/olmguard", Namespace: "https://example.com/v0.2.0/sbom#c0ffee",
		Created: time.Unix(1790000000, 0),
		Programs: map[string][]*debug.BuildInfo{
			"controller":       {{GoVersion: "go1.26.8", Main: main, Deps: []*debug.Module{clientGo, replaced}}, {GoVersion: "go1.26.8", Main: main, Deps: []*debug.Module{clientGo}}},
			"kubectl-olmguard": {{GoVersion: "go1.26.8", Main: main, Deps: []*debug.Module{clientGo}}},
		},
	}
}

// TestSBOM: the SBOM is an SPDX 2.3 document with its required fields, describing the image,
// which contains each program, each depending on every module linked into it (one package per
// module version, with its purl and go.sum's hash in hex), dated by the input, not the clock.
func TestSBOM(t *testing.T) {
	in := sbomInput()
	b, err := SBOM(in)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSPDX(t, b)
	if doc.CreationInfo.Created != "2026-09-21T14:13:20Z" {
		t.Errorf("created %q, want the input's time", doc.CreationInfo.Created)
	}
	byName := map[string]spdxPackage{}
	for _, p := range doc.Packages {
		if _, dup := byName[p.Name+"@"+p.VersionInfo]; dup {
			t.Errorf("package %s %s listed twice", p.Name, p.VersionInfo)
		}
		byName[p.Name+"@"+p.VersionInfo] = p
	}
	cg, ok := byName["k8s.io/client-go@v0.36.3"]
	if !ok || len(cg.ExternalRefs) != 1 || cg.ExternalRefs[0].Locator != "pkg:golang/k8s.io/client-go@v0.36.3" ||
		len(cg.Checksums) != 1 || cg.Checksums[0].Algorithm != "SHA256" || cg.Checksums[0].Value != "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f" {
		t.Errorf("client-go: %+v", cg)
	}
	if fork, ok := byName["example.com/fork@v1.0.1+incompatible"]; !ok || fork.ExternalRefs[0].Locator != "pkg:golang/example.com/fork@v1.0.1%2Bincompatible" {
		t.Errorf("a replaced module is listed as what was built: %+v", fork)
	}
	if m, ok := byName["github.com/olmguard/olmguard@v0.2.0"]; !ok || m.PrimaryPurpose != "SOURCE" {
		t.Errorf("the main module is not listed at the release's version: %+v", m)
	}
	if _, ok := byName["stdlib@go1.26.8"]; !ok {
		t.Error("the Go standard library is not listed")
	}
	rel := map[string]bool{}
	for _, r := range doc.Relationships {
		rel[r.Element+" "+r.Type+" "+r.Related] = true
	}
	for _, want := range []string{
		"SPDXRef-DOCUMENT DESCRIBES SPDXRef-Image",
		"SPDXRef-Image CONTAINS SPDXRef-Program-controller",
		"SPDXRef-Image CONTAINS SPDXRef-Program-kubectl-olmguard",
		"SPDXRef-Program-controller DEPENDS_ON " + cg.SPDXID,
		"SPDXRef-Program-kubectl-olmguard DEPENDS_ON " + cg.SPDXID,
		"SPDXRef-Program-controller DEPENDS_ON " + byName["example.com/fork@v1.0.1+incompatible"].SPDXID,
		"SPDXRef-Program-controller GENERATED_FROM " + byName["github.com/olmguard/olmguard@v0.2.0"].SPDXID,
	} {
		if !rel[want] {
			t.Errorf("no relationship %q", want)
		}
	}
	if rel["SPDXRef-Program-kubectl-olmguard DEPENDS_ON "+byName["example.com/fork@v1.0.1+incompatible"].SPDXID] {
		t.Error("the plugin depends on a module only the controller links")
	}
	again, _ := SBOM(in)
	if string(again) != string(b) {
		t.Error("two SBOMs of one input differ")
	}
	in.Created = time.Time{}
	if _, err := SBOM(in); err == nil {
		t.Error("an SBOM without a creation time was written")
	}
}

type spdxParsed struct {
	spdxDoc
	DocumentDescribes []string `json:"documentDescribes"`
}

// parseSPDX reads an SPDX 2.3 JSON document and checks the fields the specification requires.
func parseSPDX(t *testing.T, b []byte) spdxParsed {
	t.Helper()
	var doc spdxParsed
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("SBOM: %v", err)
	}
	if doc.SPDXVersion != "SPDX-2.3" || doc.DataLicense != "CC0-1.0" || doc.SPDXID != "SPDXRef-DOCUMENT" || doc.Name == "" ||
		!strings.Contains(doc.DocumentNamespace, "://") || len(doc.CreationInfo.Creators) == 0 {
		t.Errorf("document fields: %+v", doc.spdxDoc)
	}
	if _, err := time.Parse(time.RFC3339, doc.CreationInfo.Created); err != nil || !strings.HasSuffix(doc.CreationInfo.Created, "Z") {
		t.Errorf("created %q: %v", doc.CreationInfo.Created, err)
	}
	ids := map[string]bool{"SPDXRef-DOCUMENT": true}
	for _, p := range doc.Packages {
		if p.Name == "" || p.DownloadLocation == "" || !strings.HasPrefix(p.SPDXID, "SPDXRef-") || strings.Trim(p.SPDXID[8:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "" || ids[p.SPDXID] {
			t.Errorf("package %+v: name, downloadLocation and a unique SPDXID of letters, digits, . and - are required", p)
		}
		ids[p.SPDXID] = true
	}
	for _, r := range doc.Relationships {
		if !ids[r.Element] || !ids[r.Related] {
			t.Errorf("relationship %+v names an unknown element", r)
		}
	}
	return doc
}
