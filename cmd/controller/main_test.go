package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
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
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/test/testenv"
)

// envRunMain makes the test binary act as the command, so the SIGTERM test runs a real process.
const envRunMain = "OLMGUARD_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunMain) == "1" {
		main()
	}
	os.Exit(m.Run())
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--help"}, &stdout, &stderr); code != 0 {
		t.Fatalf("--help exited %d: %s", code, stderr.String())
	}
	help := stdout.String()
	o := controller.DefaultOptions()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	o.BindFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if !strings.Contains(help, "--"+f.Name) {
			t.Errorf("--help does not document --%s", f.Name)
		}
	})
	for _, want := range []string{
		"--leader-elect\n", "(default false)", "--leader-election-namespace string\n", "(default olmguard-system)",
		"--catalog-pod-grace duration\n", "(default 30s)", "(default 10m0s)", "(default opt-in)", "(default 10)",
		"(default :8081)", "(default :8080)", "--kubeconfig", "--zap-log-level",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
	if n := strings.Count(help, "(default "); n != strings.Count(help, "\n  --") {
		t.Errorf("%d defaults for %d flags", n, strings.Count(help, "\n  --"))
	}
}

func TestBadFlagsExitWithOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--operand-cleanup=sometimes"}, `invalid value "sometimes" for flag --operand-cleanup: must be one of opt-in, always, never`},
		{[]string{"--catalog-pod-grace=30"}, "--catalog-pod-grace"},
		{[]string{"--cleanup-timeout=-1m"}, "--cleanup-timeout -1m0s must be at least 1s"},
		{[]string{"--drift-window=0s"}, "--drift-window"},
		{[]string{"--unpack-job-ttl=1s"}, "--unpack-job-ttl"},
		{[]string{"--catalog-pod-deletions-per-minute=0"}, "--catalog-pod-deletions-per-minute"},
		{[]string{"--leader-election-namespace=Nope!"}, "--leader-election-namespace"},
		{[]string{"--metrics-bind-address=:notaport"}, "--metrics-bind-address"},
		{[]string{"--leader-elect=maybe"}, "--leader-elect"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit status %d, want 2", code)
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, tc.want) || !strings.HasPrefix(msg, name+": ") {
				t.Errorf("stderr = %q, want one line with %q", msg, tc.want)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", stdout.String())
			}
		})
	}
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	env := testenv.Start(t)
	if err := env.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "olmguard-sigterm"}}); err != nil {
		t.Fatal(err)
	}
	kubeconfig := writeKubeconfig(t, env.Config)
	health := freePort(t)
	cmd := exec.Command(os.Args[0], "--kubeconfig="+kubeconfig, "--leader-elect", "--leader-election-namespace=olmguard-sigterm",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", health), "--metrics-bind-address=0")
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
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("still running 60s after SIGTERM\n%s", out.String())
	}
}

func waitReady(t *testing.T, port int, exited <-chan error, out *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
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
			t.Fatalf("not ready within 60s\n%s", out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}
