package review

import "strings"

// PointerToken escapes a map key as one JSON pointer reference token (RFC 6901): "~" as "~0",
// "/" as "~1", so that a label or annotation key becomes one step of a patch's path. Every other
// byte, control characters included, is the JSON encoder's to escape.
func PointerToken(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
