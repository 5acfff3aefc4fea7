package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/olmguard/olmguard/test/clitest"
)

func TestUsageAndErrors(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{nil, 0, "Usage: kubectl olmguard"},
		{[]string{"--help"}, 0, "uninstall"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"uninstall", "--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"--help"}, 0, "doctor"},
		{[]string{"--help"}, 0, "scale olmguard's Deployments (olmguard-system) to zero"},
		{[]string{"doctor", "-o", "yaml"}, 2, `--output "yaml": must be table or json`},
		{[]string{"doctor", "--stuck-after=-1s"}, 2, "must not be negative"},
		{[]string{"doctor", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"doctor", "--recheck=soon"}, 2, "recheck"},
		{[]string{"uninstall", "-n", "x"}, 2, "flag provided but not defined: -n"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		if code := run(tt.args, &stdout, &stderr); code != tt.code || !strings.Contains(stdout.String()+stderr.String(), tt.out) {
			t.Errorf("run(%q) = %d, output %q; want %d containing %q", tt.args, code, stdout.String()+stderr.String(), tt.code, tt.out)
		}
	}
}

func TestVersion(t *testing.T) {
	clitest.Version(t, run, "kubectl-olmguard", "version")
	clitest.Version(t, run, "kubectl-olmguard", "--version")
}
