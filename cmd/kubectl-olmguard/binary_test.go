package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/clitest"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// These tests run the plugin as a process: the test binary started as kubectl-olmguard (or as
// kubectl_complete-olmguard), its stdin /dev/null as under a script.

// execPlugin runs the plugin under name ("" the test binary's) with args and returns its exit
// status, stdout and stderr.
func execPlugin(t *testing.T, name string, args ...string) (int, string, string) {
	t.Helper()
	return procs.Output(t, clitest.Command(t, name, args...))
}

// twoContexts writes a kubeconfig whose current context "broken" points at no apiserver and
// whose context "good" reaches the test's, in namespace ns.
func twoContexts(t *testing.T, ns string) string {
	t.Helper()
	e := testenv.Shared(t)
	kc, err := clientcmd.LoadFromFile(testenv.WriteKubeconfig(t, e.Config))
	if err != nil {
		t.Fatal(err)
	}
	good := kc.Contexts[kc.CurrentContext]
	kc.Contexts = map[string]*clientcmdapi.Context{
		"good":   {Cluster: good.Cluster, AuthInfo: good.AuthInfo, Namespace: ns},
		"broken": {Cluster: "nowhere", AuthInfo: good.AuthInfo},
	}
	kc.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.CurrentContext = "broken"
	path := filepath.Join(t.TempDir(), "two-contexts")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// `kubectl olmguard --context good doctor -A` reaches the context named, not the current one
// (broken); without -A doctor audits the context's namespace only; the broken context fails with
// exit status 2 on one line.
func TestBinaryDoctorContexts(t *testing.T) {
	e := testenv.Shared(t)
	ns := testenv.FreshNamespace(t, e.Client, "doctor-ctx")
	csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ctx.v1"},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: "ctx", InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}}}
	if err := e.Client.Create(context.Background(), csv); err != nil {
		t.Fatal(err)
	}
	other := testenv.FreshNamespace(t, e.Client, "doctor-other")
	kubeconfig := twoContexts(t, ns)
	audit := func(t *testing.T, args ...string) doctor.Report {
		t.Helper()
		code, out, errOut := execPlugin(t, "", append([]string{"--kubeconfig", kubeconfig}, args...)...)
		if code != 0 && code != 1 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		var r doctor.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: stdout is not JSON: %v\n%s", args, err, out)
		}
		return r
	}
	t.Run("--context good doctor -A", func(t *testing.T) {
		r := audit(t, "--context", "good", "doctor", "-A", "-o", "json")
		if r.Checked["ClusterServiceVersions"] < 1 || r.Checked["Namespaces"] == 0 {
			t.Errorf("a whole-cluster audit checked %v", r.Checked)
		}
	})
	t.Run("--context good doctor: the context's namespace", func(t *testing.T) {
		r := audit(t, "--context", "good", "doctor", "-o", "json")
		if r.Checked["ClusterServiceVersions"] != 1 {
			t.Errorf("checked %v, want the one CSV of the context's namespace", r.Checked)
		}
		for _, f := range r.Findings {
			if f.Namespace != ns && f.Namespace != "" {
				t.Errorf("finding outside the context's namespace: %+v", f)
			}
		}
	})
	t.Run("--context good doctor -n other", func(t *testing.T) {
		if r := audit(t, "--context", "good", "doctor", "-n", other, "-o", "json"); r.Checked["ClusterServiceVersions"] != 0 {
			t.Errorf("checked %v, want no CSV in %s", r.Checked, other)
		}
	})
	t.Run("-n completes the namespaces of the context's cluster", func(t *testing.T) {
		code, out, errOut := execPlugin(t, completeName, "--kubeconfig", kubeconfig, "--context", "good", "doctor", "-n", "doctor-o")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || !slices.Equal(lines, []string{other, ":4"}) {
			t.Errorf("exit %d, completions %q, want %s (stderr %q)", code, lines, other, errOut)
		}
	})
	t.Run("the broken current context", func(t *testing.T) {
		code, out, errOut := execPlugin(t, "", "--kubeconfig", kubeconfig, "--request-timeout", "5s", "doctor", "-A", "-o", "json")
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "kubectl olmguard doctor: ") || !strings.Contains(errOut, "127.0.0.1:1") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

// --help, completion and kubectl's plugin completion, through the binary.
func TestBinaryHelpAndCompletion(t *testing.T) {
	for _, args := range [][]string{{"doctor", "--help"}, {"uninstall", "--help"}, {"--help"}, {"help"}} {
		code, out, errOut := execPlugin(t, "", args...)
		if code != 0 || errOut != "" || !strings.Contains(out, "--context") {
			t.Errorf("%v: exit %d, stderr %q, stdout %.200q", args, code, errOut, out)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if code, out, errOut := execPlugin(t, "", "completion", shell); code != 0 || errOut != "" || !strings.Contains(out, "kubectl-olmguard") {
			t.Errorf("completion %s: exit %d, stderr %q, stdout %.200q", shell, code, errOut, out)
		}
	}
	// kubectl v1.26+ completes `kubectl olmguard <args>` by running kubectl_complete-olmguard <args>.
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{""}, []string{"completion", "doctor", "help", "probe", "uninstall", "version"}},
		{[]string{"doctor", "-o", ""}, []string{"table", "json", "yaml"}},
	} {
		code, out, errOut := execPlugin(t, completeName, tc.args...)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if name, _, _ := strings.Cut(line, "\t"); !strings.HasPrefix(name, ":") {
				got = append(got, name)
			}
		}
		if code != 0 || !slices.Equal(got, tc.want) {
			t.Errorf("%s %q: exit %d, completions %q, want %q (stderr %q)", completeName, tc.args, code, got, tc.want, errOut)
		}
	}
}

// uninstall --dry-run through the binary lists the changes and makes none; without --yes, with
// its stdin /dev/null (not a terminal), it refuses and changes nothing.
func TestBinaryUninstall(t *testing.T) {
	f := newUninstallFixture(t)
	before := f.versions(t)
	code, out, errOut := execPlugin(t, "", "--kubeconfig", f.kubeconfig, "uninstall", "--dry-run")
	if code != 0 {
		t.Fatalf("--dry-run: exit %d: %s", code, errOut)
	}
	if got, want := f.listed(out), f.changes(false); !slices.Equal(got, want) {
		t.Errorf("--dry-run listed\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	code, out, errOut = execPlugin(t, "", "--kubeconfig", f.kubeconfig, "uninstall")
	if code != 2 || out != "" || !strings.Contains(errOut, "refusing to change the cluster without --yes") {
		t.Errorf("without --yes: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if after := f.versions(t); !slices.Equal(before, after) {
		t.Errorf("resourceVersions changed: %v, then %v", before, after)
	}
}
