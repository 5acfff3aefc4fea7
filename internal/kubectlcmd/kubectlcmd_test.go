package kubectlcmd

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/olmguard/olmguard/internal/shellquote"
)

const attack = "x; kubectl create clusterrolebinding pwn --clusterrole=cluster-admin --user=tenant-a; echo "

func TestValidateName(t *testing.T) {
	for _, tc := range []struct {
		kind, name string
		ok         bool
	}{
		{Namespace, "tenant-a", true},
		{Namespace, "a.b", false},
		{"ConfigMap", "a.b-c", true},
		{"ConfigMap", attack, false},
		{"ConfigMap", "", false},
		{"ClusterServiceVersion", "etcd.v0.9.4", true},
		{"Job", "Job", false},
		{Service, "packageserver-service", true},
		{Service, "1svc", false},
		{Container, "registry-server", true},
		{"Pod", strings.Repeat("a", 254), false},
		{"Pod", "a\x1b[2J", false},
	} {
		if err := ValidateName(tc.kind, tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidateName(%s, %q) = %v, want ok %v", tc.kind, tc.name, err, tc.ok)
		}
	}
}

func TestCommand(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cmd     Command
		want    string
		wantErr string
	}{
		{"delete", In("tenant-a", "delete").Ref("job", "Job", "unpack-x").Ref("configmap", "ConfigMap", "x"),
			"kubectl -n tenant-a delete job/unpack-x configmap/x", ""},
		{"literal with quotes", In("ns", "patch", "catalogsource").Name("", "CatalogSource", "c").Args("--type", "merge", "-p", `{"spec":{"address":"HOST:PORT"}}`),
			`kubectl -n ns patch catalogsource c --type merge -p '{"spec":{"address":"HOST:PORT"}}'`, ""},
		{"selector", In("ns", "delete", "job").Selector("operatorframework.io/bundle-unpack-ref", "abc"),
			"kubectl -n ns delete job -l operatorframework.io/bundle-unpack-ref=abc", ""},
		{"no namespace", New("olmguard", "uninstall"), "kubectl olmguard uninstall", ""},
		{"attack in a ref", In("tenant-a", "delete").Ref("job", "Job", "unpack-x").Ref("configmap", "ConfigMap", attack),
			"", `ConfigMap name "x; kubectl create`},
		{"attack in a namespace", In("a;b", "get", "deploy"), "", `Namespace name "a;b" is not a valid Kubernetes name`},
		{"bad selector", In("ns", "describe", "pods").Selector("olm.catalogSource", "a b"), "", `label value "a b"`},
		{"first error kept", In("ns").Name("", "Pod", "A").Name("-c", Container, "B"), "", `Pod name "A"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.cmd.String()
			if tc.wantErr != "" {
				var ne *NameError
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !errors.As(err, &ne) || got != "" {
					t.Fatalf("got %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
			argv, _ := tc.cmd.Argv()
			if words, err := shellquote.Split(got); err != nil || !slices.Equal(words, argv) {
				t.Fatalf("%q splits into %q, %v; want %q", got, words, err, argv)
			}
		})
	}
}

func TestBuildAllOrNone(t *testing.T) {
	cmds, err := Build(In("ns", "delete", "job").Name("", "Job", "ok"), In("ns", "delete", "configmap").Name("", "ConfigMap", attack))
	if err == nil || cmds != nil {
		t.Fatalf("Build = %q, %v; want no command and an error", cmds, err)
	}
	cmds, err = Build(In("ns", "get", "csv"), New("olmguard", "uninstall"))
	if err != nil || !slices.Equal(cmds, []string{"kubectl -n ns get csv", "kubectl olmguard uninstall"}) {
		t.Fatalf("Build = %q, %v", cmds, err)
	}
}

// FuzzCommand checks that whatever name is given, the command is either an error or one kubectl
// invocation whose words are the arguments it was built from.
func FuzzCommand(f *testing.F) {
	for _, s := range []string{"x", attack, "a.b", "", "A", "$(id)", "x\ny"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, ns, name string) {
		c := In(ns, "delete").Ref("configmap", "ConfigMap", name).Selector("l", name)
		s, err := c.String()
		if err != nil {
			return
		}
		argv, _ := c.Argv()
		words, err := shellquote.Split(s)
		if err != nil || !slices.Equal(words, argv) || words[0] != "kubectl" {
			t.Fatalf("%q splits into %q, %v; want %q", s, words, err, argv)
		}
	})
}
