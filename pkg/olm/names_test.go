package olm

import (
	"strings"
	"testing"
)

func TestUnpackName(t *testing.T) {
	// The value from OLM issue #3210 is 63 hex characters; any bundle path gives the same shape.
	got := UnpackName("quay.io/example/operator-bundle:v1.0.0")
	if len(got) != 63 || strings.Trim(got, "0123456789abcdef") != "" {
		t.Fatalf("UnpackName = %q, want 63 lowercase hex characters", got)
	}
	if UnpackName("a") == UnpackName("b") {
		t.Fatal("different bundle paths must not share an unpack name")
	}
	if a, again := UnpackName("a"), UnpackName("a"); a != again {
		t.Fatal("UnpackName must be deterministic")
	}
}

func TestComponentLabelKey(t *testing.T) {
	tests := []struct{ pkg, ns, want string }{
		{"etcd", "operators", "operators.coreos.com/etcd.operators"},
		{strings.Repeat("a", 62), "ns", "operators.coreos.com/" + strings.Repeat("a", 62)},
		{strings.Repeat("b", 61), "ns", "operators.coreos.com/" + strings.Repeat("b", 61) + ".n"},
		{"p", "x-", "operators.coreos.com/p.x"},
	}
	for _, tt := range tests {
		if got := ComponentLabelKey(tt.pkg, tt.ns); got != tt.want {
			t.Errorf("ComponentLabelKey(%q, %q) = %q, want %q", tt.pkg, tt.ns, got, tt.want)
		}
	}
}
