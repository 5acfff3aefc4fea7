package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/test/testbin"
)

// The kwokctl configuration template renders, and points every binary at a local file: kwokctl
// must never download anything.
func TestKwokctlTemplate(t *testing.T) {
	root, err := testbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := os.ReadFile(filepath.Join(root, "hack", "kwok", "kwokctl.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vars, err := readVersions(filepath.Join(root, "hack", "versions.env"))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"KUBE_VERSION", "ETCD_VERSION", "KWOK_VERSION"} {
		if vars[k] == "" {
			t.Errorf("hack/versions.env lacks %s", k)
		}
	}
	vars["BIN_DIR"] = `/bin dir/with "quotes"`
	vars["KUBECTL"] = "/shim/kubectl"
	vars["NODE_HEARTBEAT_STAGE"] = "/stage.yaml"
	for name, port := range (&portBlock{base: 30000}).vars() {
		vars[name] = port
	}
	out, err := render(string(tmpl), vars)
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Kind    string         `json:"kind"`
		Options map[string]any `json:"options"`
	}
	if err := yaml.Unmarshal([]byte(out), &conf); err != nil {
		t.Fatalf("rendered configuration is not YAML: %v\n%s", err, out)
	}
	if conf.Kind != "KwokctlConfiguration" || conf.Options["runtime"] != "binary" {
		t.Errorf("kind %q runtime %v, want a binary-runtime KwokctlConfiguration", conf.Kind, conf.Options["runtime"])
	}
	binaries := 0
	for k, v := range conf.Options {
		if !strings.HasSuffix(k, "Binary") && !strings.HasSuffix(k, "BinaryTar") && !strings.HasSuffix(k, "BinaryPrefix") {
			continue
		}
		binaries++
		if s, _ := v.(string); !filepath.IsAbs(s) || strings.Contains(s, "://") {
			t.Errorf("options.%s = %q: want an absolute local path", k, v)
		}
	}
	if binaries < 6 {
		t.Errorf("only %d binaries configured", binaries)
	}
	if got := conf.Options["etcdBinary"]; got != `/bin dir/with "quotes"/etcd` {
		t.Errorf("etcdBinary = %q", got)
	}
	// Every port kwokctl would otherwise choose itself comes from the cluster's block.
	ports := map[float64]string{}
	for _, k := range []string{"kubeApiserverPort", "etcdPort", "etcdPeerPort", "kubeControllerManagerPort", "kubeSchedulerPort", "kwokControllerPort"} {
		p, _ := conf.Options[k].(float64)
		if p < 30000 || p >= 30000+portBlockSize {
			t.Errorf("options.%s = %v: want a port of the block [30000, %d)", k, conf.Options[k], 30000+portBlockSize)
		}
		if other, dup := ports[p]; dup {
			t.Errorf("options.%s and options.%s share port %v", k, other, p)
		}
		ports[p] = k
	}

	if _, err := render("a: ${NOPE}", vars); err == nil {
		t.Error("an unknown placeholder must be an error")
	}
}
