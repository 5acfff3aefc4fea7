// Package printable makes text that others wrote safe to print to a terminal: every character a
// terminal could act on (control characters, 8-bit CSI, bidirectional overrides) and every byte
// that is not UTF-8 becomes a visible escape. Names, messages, addresses, labels and annotations
// a tenant writes reach an admin's terminal through olmguard's tables, logs and Events; printed
// raw, an ESC sequence could move the cursor, rewrite what was printed before, or hide a link
// (OSC 8).
package printable

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Escape returns s with every unsafe character replaced by a visible escape: a byte of invalid
// UTF-8 and the C0 controls and DEL as \xNN, other unsafe runes (C1 controls U+0080–U+009F,
// bidirectional marks, embeddings, overrides and isolates, line and paragraph separators) as
// \uNNNN. Everything else, including other backslashes, is kept as it is.
func Escape(s string) string {
	if safe(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case Unsafe(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Line is Escape for one line of a table or a log message: runs of white space (newlines and
// tabs included) become one space, leading and trailing white space is dropped, and what remains
// is escaped.
func Line(s string) string { return Escape(strings.Join(strings.Fields(s), " ")) }

// Unsafe reports whether a terminal may act on r instead of showing it: the C0 controls, DEL, the
// C1 controls, the bidirectional formatting characters and the line and paragraph separators.
func Unsafe(r rune) bool {
	switch {
	case r < 0x20, r >= 0x7f && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f: // ARABIC LETTER MARK, LRM, RLM
		return true
	case r >= 0x202a && r <= 0x202e: // embeddings and overrides
		return true
	case r >= 0x2066 && r <= 0x2069: // isolates
		return true
	case r == 0x2028, r == 0x2029: // line and paragraph separators
		return true
	}
	return false
}

// safe reports whether s needs no escape (the common case, checked without allocating).
func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			return utf8.ValidString(s) && !strings.ContainsFunc(s, Unsafe)
		}
	}
	return true
}
