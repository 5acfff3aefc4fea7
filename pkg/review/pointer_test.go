package review

import "testing"

// A key's "~" and "/" are escaped, "~" first, so that "~1" in a key stays two characters.
func TestPointerToken(t *testing.T) {
	for key, want := range map[string]string{
		"plain":                       "plain",
		"olmguard.io/cleanup-tracked": "olmguard.io~1cleanup-tracked",
		"a~b":                         "a~0b",
		"a~1b":                        "a~01b",
		"a/~/b":                       "a~1~0~1b",
		"":                            "",
	} {
		if got := PointerToken(key); got != want {
			t.Errorf("PointerToken(%q) = %q, want %q", key, got, want)
		}
	}
}
