// Package tlsconfig holds the TLS policy of every server olmguard runs (admission webhook,
// /metrics): TLS 1.2 at least, and HTTP/1.1 only. HTTP/2 is not needed and exposed servers to
// rapid-reset attacks.
package tlsconfig

import "crypto/tls"

// Harden applies olmguard's TLS policy to c.
func Harden(c *tls.Config) {
	c.MinVersion = tls.VersionTLS12
	c.NextProtos = []string{"http/1.1"}
}
