package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/olmguard/olmguard/internal/kubeapi"
	"github.com/olmguard/olmguard/test/clitest"
)

func runFor(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := runWith(args, streams{in: strings.NewReader(""), out: &stdout, err: &stderr, terminal: func() bool { return false }})
	return code, stdout.String(), stderr.String()
}

// kubectl's connection flags every command takes (k8s.io/cli-runtime).
var connectionFlags = []string{"--kubeconfig", "--context", "--cluster", "--user", "--as", "--as-group", "--request-timeout", "--namespace", "--server", "--token"}

// --help of the plugin and of each command exits 0 and prints to stdout only, with kubectl's
// connection flags and the command's own. Fails on the flag package's plugin, whose commands had
// no --help of their own (exit 2) and no connection flag but --kubeconfig.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"kubectl olmguard", "doctor", "uninstall", "probe", "completion", "version"}},
		{[]string{"--help"}, []string{"doctor", "uninstall"}},
		{[]string{"help", "doctor"}, []string{"--output", "--all-namespaces"}},
		{[]string{"doctor", "--help"}, []string{"-A, --all-namespaces", "-o, --output", "--stuck-after", "--pending-after", "--recheck",
			"--include-copied-csvs", "--copied-csvs-above", "Exit status: 0 healthy, 1 problems found, 2"}},
		{[]string{"uninstall", "--help"}, []string{"--stop-timeout", "olmguard.io/cleanup"}},
		{[]string{"probe", "--help"}, []string{"--olmguard-namespace", "dryRun=All", "Exit status: 0 the webhook was called, 1 it was not"}},
		{[]string{"version", "--help"}, nil},
		{[]string{"completion", "--help"}, []string{"bash", "zsh", "fish"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, errOut := runFor(tc.args...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			want := tc.want
			if len(tc.args) == 0 || tc.args[0] != "completion" {
				want = append(want, connectionFlags...)
			}
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("help lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// Usage errors exit 2 with one line on stderr naming the command, nothing on stdout.
func TestUsageErrors(t *testing.T) {
	run := func(args []string, stdout, stderr *bytes.Buffer) int { // clitest.Run's shape without a terminal
		return runWith(args, streams{in: strings.NewReader(""), out: stdout, err: stderr, terminal: func() bool { return false }})
	}
	clitest.BadFlags(t, run2(run), "kubectl olmguard", []clitest.BadFlag{
		{Args: []string{"frobnicate"}, Want: `unknown command "frobnicate"`},
		{Args: []string{"--no-such-flag"}, Want: "unknown flag: --no-such-flag"},
	})
	clitest.BadFlags(t, run2(run), "kubectl olmguard doctor", []clitest.BadFlag{
		{Args: []string{"doctor", "--no-such-flag"}, Want: "unknown flag: --no-such-flag"},
		{Args: []string{"doctor", "-o", "xml"}, Want: `--output "xml": must be table, json or yaml`},
		{Args: []string{"doctor", "--stuck-after=-1s"}, Want: "must not be negative"},
		{Args: []string{"doctor", "--copied-csvs-above=-1"}, Want: "must not be negative"},
		{Args: []string{"doctor", "extra"}, Want: `unknown command "extra"`},
		{Args: []string{"doctor", "--recheck=soon"}, Want: "recheck"},
		{Args: []string{"doctor", "-A", "-n", "x"}, Want: "exclude each other"},
		{Args: []string{"-n", "x", "doctor", "-A"}, Want: "exclude each other"},
	})
	clitest.BadFlags(t, run2(run), "kubectl olmguard uninstall", []clitest.BadFlag{
		{Args: []string{"uninstall", "--no-such-flag"}, Want: "unknown flag: --no-such-flag"},
		{Args: []string{"uninstall", "--stop-timeout=0s"}, Want: "--stop-timeout must be positive"},
	})
}

// run2 turns a run of bytes.Buffers into a clitest.Run.
func run2(run func([]string, *bytes.Buffer, *bytes.Buffer) int) clitest.Run {
	return func(args []string, stdout, stderr io.Writer) int {
		var o, e bytes.Buffer
		code := run(args, &o, &e)
		_, _ = stdout.Write(o.Bytes())
		_, _ = stderr.Write(e.Bytes())
		return code
	}
}

func TestVersion(t *testing.T) {
	clitest.Version(t, run, "kubectl-olmguard", "version")
	clitest.Version(t, run, "kubectl-olmguard", "--version")
}

// doctor audits, as kubectl reads, the namespace of -n, else the context's, else "default"; -A
// every namespace. Fails with the flag package's plugin, which audited every namespace unless -n.
// The plugin's requests are limited as the controller's are (100 a second, bursts of 200), not by
// client-go's default of 5 a second: doctor -A reads 290 List pages on a cluster of 2,000
// namespaces, which took 48.6 s at 5 a second (docs/performance.md). Fails without
// kubeapi.WithLimits in restConfig: QPS 0 (client-go's 5).
func TestRequestLimits(t *testing.T) {
	cf := genericclioptions.NewConfigFlags(false)
	kubeconfig := writeKubeconfig(t)
	cf.KubeConfig = &kubeconfig
	cfg, err := restConfig(cf, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != kubeapi.DefaultQPS || cfg.Burst != kubeapi.DefaultBurst {
		t.Errorf("QPS %v burst %d, want %d and %d", cfg.QPS, cfg.Burst, kubeapi.DefaultQPS, kubeapi.DefaultBurst)
	}
}

func TestDoctorNamespace(t *testing.T) {
	kubeconfig := writeKubeconfig(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "team-a"},
		{[]string{"--context", "bare"}, "default"},
		{[]string{"-n", "other"}, "other"},
		{[]string{"--context", "bare", "-n", "other"}, "other"},
		{[]string{"-A"}, ""},
		{[]string{"--context", "bare", "--all-namespaces"}, ""},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			cf := genericclioptions.NewConfigFlags(false)
			var all bool
			cmd := &cobra.Command{Run: func(*cobra.Command, []string) {}}
			cf.AddFlags(cmd.Flags())
			cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "")
			if err := cmd.ParseFlags(append([]string{"--kubeconfig", kubeconfig}, tc.args...)); err != nil {
				t.Fatal(err)
			}
			got, err := doctorNamespace(cf, all)
			if err != nil || got != tc.want {
				t.Errorf("namespace %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// writeKubeconfig writes a kubeconfig of two contexts, team (namespace team-a, current) and bare.
func writeKubeconfig(t *testing.T) string {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: team
  context: {cluster: c, user: u, namespace: team-a}
- name: bare
  context: {cluster: c, user: u}
current-context: team
`), 0o600); err != nil {
		t.Fatal(err)
	}
	return kubeconfig
}

// kubectl runs kubectl_complete-olmguard with the words typed after `kubectl olmguard`; the
// binary answers them as __complete.
func TestCompletionArgs(t *testing.T) {
	for _, tc := range []struct {
		argv0 string
		args  []string
		want  string
	}{
		{"/usr/local/bin/kubectl-olmguard", []string{"doctor"}, "doctor"},
		{"/usr/local/bin/kubectl_complete-olmguard", []string{"doctor", ""}, "__complete doctor "},
		{`C:\bin\kubectl_complete-olmguard.exe`, []string{""}, "__complete "},
		{"kubectl_complete-olmguard", []string{"__complete", "do"}, "__complete do"},
		{"kubectl_complete-olmguard", nil, "__complete"},
	} {
		if got := strings.Join(completionArgs(tc.argv0, tc.args), " "); got != tc.want {
			t.Errorf("completionArgs(%q, %q) = %q, want %q", tc.argv0, tc.args, got, tc.want)
		}
	}
}

// `completion bash|zsh|fish` prints each shell's script for kubectl-olmguard.
func TestCompletionScripts(t *testing.T) {
	for shell, want := range map[string]string{
		"bash": "complete -o default -F __start_kubectl-olmguard kubectl-olmguard",
		"zsh":  "#compdef kubectl-olmguard",
		"fish": "complete -c kubectl-olmguard",
	} {
		code, out, errOut := runFor("completion", shell)
		if code != 0 || errOut != "" || !strings.Contains(out, want) || !strings.Contains(out, "__complete") {
			t.Errorf("completion %s: exit %d, stderr %q, script without %q:\n%.300s", shell, code, errOut, want, out)
		}
	}
}

// __complete (what kubectl_complete-olmguard answers) lists the commands, doctor's -o values and
// the kubeconfig's contexts.
func TestComplete(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\ncontexts:\n- name: prod\n  context: {cluster: c}\n- name: staging\n  context: {cluster: c}\n- name: other\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"completion", "doctor", "help", "probe", "uninstall", "version"}},
		{[]string{"do"}, []string{"doctor"}},
		{[]string{"doctor", "-o", ""}, []string{"table", "json", "yaml"}},
		{[]string{"doctor", "--output", "y"}, []string{"yaml"}},
		{[]string{"--kubeconfig", kubeconfig, "--context", ""}, []string{"other", "prod", "staging"}},
		{[]string{"--kubeconfig", kubeconfig, "doctor", "--context", "s"}, []string{"staging"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, out, _ := runFor(append([]string{"__completeNoDesc"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if code != 0 || len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
				t.Fatalf("exit %d, output %q", code, out)
			}
			if got := lines[:len(lines)-1]; strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Errorf("completions %q, want %q", got, tc.want)
			}
		})
	}
}
