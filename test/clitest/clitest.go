// Package clitest checks olmguard's binaries the same way: --help documents every flag, bad flags
// exit 2 with one line, and SIGTERM stops a running process cleanly.
package clitest

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/test/testenv"
)

// envRunMain makes a test binary act as the command, so the SIGTERM test runs a real process.
const envRunMain = "OLMGUARD_TEST_RUN_MAIN"

// Run is a binary's run function: arguments in, exit status out.
type Run func(args []string, stdout, stderr io.Writer) int

// Main is the test binary's TestMain: it runs the command itself when started by SIGTERMStopsCleanly.
func Main(m *testing.M, main func()) {
	if os.Getenv(envRunMain) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// Help checks that --help exits 0 and lists every flag bind registers plus the wanted strings.
func Help(t *testing.T, run Run, bind func(*flag.FlagSet), want ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help exited %d: %s", code, stderr.String())
	}
	help := stdout.String()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	bind(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, "--"+f.Name) {
			t.Errorf("--help does not document --%s", f.Name)
		}
	})
	for _, w := range append(want, "--kubeconfig", "--zap-log-level") {
		if !strings.Contains(help, w) {
			t.Errorf("--help lacks %q", w)
		}
	}
	if n := strings.Count(help, "(default "); n != strings.Count(help, "\n  --") {
		t.Errorf("%d defaults for %d flags", n, strings.Count(help, "\n  --"))
	}
}

// BadFlag is a command line that must fail, and a part of its error.
type BadFlag struct {
	Args []string
	Want string
}

// BadFlags checks that each command line exits 2 with one line "<name>: ..." on stderr containing
// Want, and nothing on stdout.
func BadFlags(t *testing.T, run Run, name string, cases []BadFlag) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.Join(tc.Args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.Args, &stdout, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.Want) || !strings.HasPrefix(msg, name+": ") {
				t.Errorf("stderr = %q, want one line with %q", msg, tc.Want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

// SIGTERMStopsCleanly runs the test binary as the command against a real control plane, with
// args(kubeconfig, health port) and a namespace olmguard-sigterm, waits for /readyz and checks
// that SIGTERM ends it with status 0.
func SIGTERMStopsCleanly(t *testing.T, args func(kubeconfig string, health int) []string) {
	env := testenv.Start(t)
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-sigterm"}}); err != nil {
		t.Fatal(err)
	}
	health := testenv.FreePort(t)
	cmd := exec.Command(os.Args[0], args(testenv.WriteKubeconfig(t, env.Config), health)...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waitReady(t, health, exited, &out)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(testenv.Patience):
		_ = cmd.Process.Kill()
		t.Fatalf("still running %s after SIGTERM\n%s", testenv.Patience, out.String())
	}
}

func waitReady(t *testing.T, port int, exited <-chan error, out *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(testenv.Patience)
	for {
		select {
		case err := <-exited:
			t.Fatalf("exited before becoming ready: %v\n%s", err, out.String())
		default:
		}
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port)); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready within %s\n%s", testenv.Patience, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ParseFlags binds flags on a fresh flag set, parses args and validates: it fails the test unless
// the outcome is an error containing wantErr, or, with wantErr empty, no error.
func ParseFlags(t *testing.T, bind func(*flag.FlagSet), validate func() error, args []string, wantErr string) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	bind(fs)
	err := fs.Parse(args)
	if err == nil {
		err = validate()
	}
	switch {
	case wantErr == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case wantErr != "" && (err == nil || !strings.Contains(err.Error(), wantErr)):
		t.Fatalf("error = %v, want one containing %q", err, wantErr)
	}
}

// Version checks that args (e.g. --version) exit 0 and print one line naming the program and a
// version, without touching a cluster.
func Version(t *testing.T, run Run, program string, args ...string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("%v exited %d: %s", args, code, stderr.String())
	}
	out := stdout.String()
	if !strings.HasPrefix(out, program+" ") || !strings.Contains(out, "(commit ") || strings.Count(out, "\n") != 1 {
		t.Errorf("%v printed %q, want one line %q", args, out, program+" <version> (commit <sha>, ...)")
	}
}

// RunMainIfAsked runs main, which exits, when the test binary was started as the command (by
// Command or SIGTERMStopsCleanly); a TestMain that does more than Main calls it first.
func RunMainIfAsked(main func()) {
	if os.Getenv(envRunMain) == "1" {
		main()
	}
}

// Command runs the test binary as the command (its TestMain calls Main or RunMainIfAsked) with
// args. With name set, it runs it under that name (a link in a temporary directory), for a binary
// that acts by the name it was started as.
func Command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	bin := os.Args[0]
	if name != "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(t.TempDir(), name)
		if err := os.Symlink(self, bin); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), envRunMain+"=1")
	return cmd
}
