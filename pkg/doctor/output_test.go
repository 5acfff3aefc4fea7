package doctor

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// hostile holds what a terminal acts on: ESC with a CSI sequence (clear screen), an OSC 8
// hyperlink, a cursor move, the 8-bit CSI U+009B and a right-to-left override.
const hostile = "\x1b[2J\x1b]8;;http://x\x1b\\click\x1b]8;;\x1b\\\x1b[1A\u009b31m\u202egnp.exe"

// A CatalogSource's address and status message are written by whoever may edit the catalog: the
// table shows them escaped, -o json exactly. Fails before the fix: the table printed the raw
// escape sequences (oneLine collapsed white space only).
func TestTableEscapesControlCharacters(t *testing.T) {
	cs := v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cat", CreationTimestamp: *ago(time.Hour)},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: "10.0.0.1:50051" + hostile}}
	cs.Status.ConnectionState = &v1alpha1.GRPCConnectionState{Address: cs.Spec.Address, LastObservedState: "TRANSIENT_FAILURE"}
	cs.Status.Reason, cs.Status.Message = "Error", "message"+hostile
	r := &Report{Findings: CheckCatalogSources([]v1alpha1.CatalogSource{cs}, now, time.Minute), Checked: map[string]int{},
		Skipped: []string{"OLM checks: cannot list" + hostile}}
	if len(r.Findings) != 1 {
		t.Fatalf("findings %+v", r.Findings)
	}
	var table bytes.Buffer
	if err := WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, raw := range []string{"\x1b", "\u009b", "\u202e"} {
		if strings.Contains(out, raw) {
			t.Errorf("table holds %q raw:\n%s", raw, out)
		}
	}
	escaped := `\x1b[2J\x1b]8;;http://x\x1b\click\x1b]8;;\x1b\\x1b[1A\u009b31m\u202egnp.exe`
	if n := strings.Count(out, escaped); n != 4 { // the skipped check, the evidence twice, the fix
		t.Errorf("table shows the escaped text %d times, want 4:\n%s", n, out)
	}

	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	f := back.Findings[0]
	if !strings.Contains(f.Evidence, "address 10.0.0.1:50051"+hostile) || !strings.Contains(f.Evidence, "message"+hostile) ||
		!strings.Contains(f.Fix, hostile) || back.Skipped[0] != r.Skipped[0] {
		t.Errorf("-o json is not exact: %+v", back)
	}
}

// -o yaml is -o json's structure in YAML: the same report comes back from either, exactly, and the
// YAML holds no raw control character (it escapes them). Fails without WriteYAML.
func TestYAMLHasJSONStructure(t *testing.T) {
	cs := v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "cat" + hostile + "\x7f\x00\u0085", CreationTimestamp: *ago(time.Hour)},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: "10.0.0.1:50051" + hostile}}
	cs.Status.ConnectionState = &v1alpha1.GRPCConnectionState{Address: cs.Spec.Address, LastObservedState: "TRANSIENT_FAILURE"}
	r := &Report{Findings: CheckCatalogSources([]v1alpha1.CatalogSource{cs}, now, time.Minute),
		Checked: map[string]int{"CatalogSources": 1}, Pages: map[string]int{"CatalogSources": 1}, Skipped: []string{"OLM checks: cannot list" + hostile}}
	for name, r := range map[string]*Report{"findings": r, "healthy": {Checked: map[string]int{"CSVs": 0}}} {
		t.Run(name, func(t *testing.T) {
			var js, ym bytes.Buffer
			if err := WriteJSON(&js, r); err != nil {
				t.Fatal(err)
			}
			if err := WriteYAML(&ym, r); err != nil {
				t.Fatal(err)
			}
			var fromJSON, fromYAML map[string]any
			if err := json.Unmarshal(js.Bytes(), &fromJSON); err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(ym.Bytes(), &fromYAML); err != nil {
				t.Fatalf("%v\n%s", err, ym.String())
			}
			if !reflect.DeepEqual(fromJSON, fromYAML) {
				t.Errorf("YAML and JSON differ:\n%s\n%s", ym.String(), js.String())
			}
			if _, ok := fromYAML["findings"].([]any); !ok {
				t.Errorf("findings is not a list: %s", ym.String())
			}
			for _, c := range ym.String() {
				if c < 0x20 && c != '\n' || c == 0x7f || c >= 0x80 && c <= 0x9f {
					t.Errorf("YAML holds the control character %U raw:\n%s", c, ym.String())
				}
			}
		})
	}
}
