package review

import (
	"strings"
	"testing"
)

func TestDecodeMeta(t *testing.T) {
	tests := []struct {
		name, body, wantErr, wantName string
	}{
		{"valid", `{"metadata":{"name":"a","namespace":"ns","ownerReferences":[{"kind":"Subscription","name":"s","uid":"u"}]}}`, "", "a"},
		{"empty metadata is fine", `{"metadata":{}}`, "", ""},
		{"empty body", ``, "empty object", ""},
		{"null", `null`, "no metadata", ""},
		{"metadata null", `{"metadata":null}`, "no metadata", ""},
		{"no metadata", `{"spec":{}}`, "no metadata", ""},
		{"wrong case is not metadata", `{"metAdAtA":{"name":"a"}}`, "no metadata", ""},
		{"truncated", `{"metadata":{"name":"a"`, "malformed", ""},
		{"wrong type", `{"metadata":{"name":7}}`, "malformed", ""},
		{"array", `[]`, "malformed", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := DecodeMeta([]byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || m.Name != tt.wantName {
				t.Fatalf("DecodeMeta = %+v, %v", m, err)
			}
		})
	}
}
