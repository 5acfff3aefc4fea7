package review

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestFields(t *testing.T) {
	tests := []struct {
		name, body string
		want       map[string]string // key -> raw value
		wantErr    string
	}{
		{"picks members", `{"apiVersion":"v1","metadata":{"name":"a","x":[1,{"y":"}"}]},"spec":{"big":"` + strings.Repeat("z", 1000) + `"},"status":{"reason":"Copied"}}`,
			map[string]string{"metadata": `{"name":"a","x":[1,{"y":"}"}]}`, "status": `{"reason":"Copied"}`}, ""},
		{"whitespace and escapes", " {\n \"spec\" : \"a\\\"}\\\\\" ,\t\"metadata\" : { } } ", map[string]string{"metadata": `{ }`}, ""},
		{"escaped key", `{"meta\u0064ata":{"name":"a"}}`, map[string]string{"metadata": `{"name":"a"}`}, ""},
		{"case-sensitive", `{"metAdAtA":{"name":"a"}}`, map[string]string{}, ""},
		{"last duplicate wins", `{"metadata":{"name":"a"},"metadata":{"name":"b"}}`, map[string]string{"metadata": `{"name":"b"}`}, ""},
		{"scalars", `{"a":1.5e3,"b":true,"c":null,"metadata":false}`, map[string]string{"metadata": `false`}, ""},
		{"empty", `{}`, map[string]string{}, ""},
		{"null", `null`, nil, "not a JSON object"},
		{"array", `[]`, nil, "not a JSON object"},
		{"empty body", ``, nil, "not a JSON object"},
		{"truncated string", `{"metadata":{"name":"a`, nil, "unterminated string"},
		{"truncated object", `{"metadata":{"name":"a"}`, nil, "expected ',' or '}'"},
		{"unbalanced", `{"metadata":{"a":[1}}`, nil, "unexpected '}'"},
		{"bad scalar", `{"metadata":nope}`, nil, "invalid value"},
		{"missing colon", `{"metadata" {}}`, nil, "expected ':'"},
		{"trailing data", `{"metadata":{}} x`, nil, "data after the object"},
		{"non-string key", `{1:2}`, nil, "expected a string"},
		{"too deep", `{"metadata":` + strings.Repeat("[", maxDepth+1) + `}`, nil, "nested too deeply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Fields([]byte(tt.body), "metadata", "status")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for k, v := range tt.want {
				if string(got[k]) != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// On any valid JSON object, Fields agrees with encoding/json; on anything else it errors or
// agrees, and never panics.
func FuzzFields(f *testing.F) {
	for _, s := range []string{`{"metadata":{"name":"a"},"status":{"reason":"x"}}`, `{"a":"\\\"","metadata":[1,2,{"b":null}]}`,
		`{"metadata":"\u00e9"}`, `{`, `{"metadata":}`, `[{"metadata":1}]`, `{"metadata":{"a":"}"}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := Fields(raw, "metadata")
		var ref map[string]json.RawMessage
		refErr := json.Unmarshal(raw, &ref)
		if refErr != nil || ref == nil || !json.Valid(raw) {
			return // invalid for encoding/json: Fields may reject or skip, but did not panic
		}
		if err != nil {
			t.Fatalf("Fields rejected a valid object %q: %v", raw, err)
		}
		want, ok := ref["metadata"]
		// encoding/json matches keys case-insensitively; Fields only exactly.
		exact := bytes.Contains(raw, []byte(`"metadata"`)) || bytes.Contains(raw, []byte(`\u`))
		if !ok || !exact {
			return
		}
		if g, ok := got["metadata"]; ok && !bytes.Equal(compact(t, g), compact(t, want)) && !strings.Contains(string(raw), `"Metadata"`) {
			t.Fatalf("metadata = %q, want %q", g, want)
		}
	})
}

func compact(t *testing.T, b []byte) []byte {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
