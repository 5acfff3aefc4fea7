package olmaudit

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/pkg/doctor"
)

// rawSink keeps what is logged as it is given, unquoted: as a console encoder would print it.
type rawSink struct{ lines [][]any }

func (s *rawSink) Init(logr.RuntimeInfo) {}
func (s *rawSink) Enabled(int) bool      { return true }
func (s *rawSink) Error(_ error, msg string, kv ...any) {
	s.lines = append(s.lines, append([]any{msg}, kv...))
}
func (s *rawSink) Info(_ int, msg string, kv ...any) {
	s.lines = append(s.lines, append([]any{msg}, kv...))
}
func (s *rawSink) WithValues(...any) logr.LogSink { return s }
func (s *rawSink) WithName(string) logr.LogSink   { return s }

// A finding quotes what tenants and OLM wrote (a catalog's address, OLM's messages): its log line
// escapes their control characters.
func TestLogFindingEscapes(t *testing.T) {
	const hostile = "\x1b]8;;http://x\x1b\\click\x1b]8;;\x1b\\\x1b[2J\u009b31m\u202e"
	sink := &rawSink{}
	logFinding(logr.New(sink), doctor.Finding{Class: doctor.OLM, Check: "CatalogNotReady", Kind: "CatalogSource", Namespace: "tenant-a", Name: "c",
		Problem: "p" + hostile, Evidence: "address" + hostile, Fix: "fix" + hostile, Commands: []string{"kubectl -n tenant-a get pods"}})
	if len(sink.lines) != 1 {
		t.Fatalf("logged %d lines", len(sink.lines))
	}
	var texts []string
	for _, v := range sink.lines[0] {
		switch v := v.(type) {
		case string:
			texts = append(texts, v)
		case []string:
			texts = append(texts, v...)
		}
	}
	all := strings.Join(texts, " ")
	if printable.Escape(all) != all || !strings.Contains(all, `address\x1b]8;;http://x`) || !strings.Contains(all, "kubectl -n tenant-a get pods") {
		t.Errorf("logged %q", all)
	}
}
