package tlsconfig

import (
	"crypto/tls"
	"slices"
	"testing"
)

func TestHarden(t *testing.T) {
	c := &tls.Config{MinVersion: tls.VersionTLS10, NextProtos: []string{"h2", "http/1.1"}}
	Harden(c)
	if c.MinVersion != tls.VersionTLS12 || !slices.Equal(c.NextProtos, []string{"http/1.1"}) {
		t.Errorf("after Harden: MinVersion %x, NextProtos %v", c.MinVersion, c.NextProtos)
	}
}
