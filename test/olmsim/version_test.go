package olmsim

import "testing"

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"v0.28", V0_28, true}, {"0.29.1", V0_29, true}, {"v0.46.0", V0_46, true},
		{"v1.0.0", Version{}, false}, {"v0.21", Version{}, false}, {"v0.47", Version{}, false}, {"v0.x", Version{}, false}, {"", Version{}, false},
	} {
		got, err := ParseVersion(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseVersion(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if !V0_29.AtLeast(V0_26) || V0_25.AtLeast(V0_26) {
		t.Error("AtLeast is wrong")
	}
}
