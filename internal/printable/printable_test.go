package printable

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text: ok/ü €", "plain text: ok/ü €"},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", `\x1b]8;;http://x\x1b\link\x1b]8;;\x1b\`},
		{"\x1b[1A\x1b[2K", `\x1b[1A\x1b[2K`},
		{"csi\u009b31m", `csi\u009b31m`},
		{"raw\x9b31m", `raw\x9b31m`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"\u2066iso\u2069", `\u2066iso\u2069`},
		{"del\x7f", `del\x7f`},
		{"nul\x00bell\a", `nul\x00bell\x07`},
		{"tab\there\nnewline\r", `tab\x09here\x0anewline\x0d`},
		{"\u2028sep", `\u2028sep`},
		{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},
		{"", ""},
	} {
		if got := Escape(tc.in); got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"  two\n\tlines  ", "two lines"},
		{"a\x1b[31m red \x1b[0m", `a\x1b[31m red \x1b[0m`},
		{"x\u0085y", "x y"}, // NEL is white space: it becomes a space
	} {
		if got := Line(tc.in); got != tc.want {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzEscape checks that Escape never leaves a character a terminal acts on, that its output is
// UTF-8, and that it keeps safe text as it is.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"", "a", "\x1b[2J", "\x1b]8;;http://x\x1b\\", "\u009b", "\u202e", "\xff", "\xc2\x9b", "ü\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Escape(s), Line(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("output %q of %q is not UTF-8", out, s)
			}
			if i := strings.IndexFunc(out, Unsafe); i >= 0 {
				t.Fatalf("output %q of %q keeps an unsafe character at %d", out, s, i)
			}
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, Unsafe) && Escape(s) != s {
			t.Fatalf("safe %q changed to %q", s, Escape(s))
		}
	})
}
