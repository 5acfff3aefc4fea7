package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testbin"
)

// Binaries lists what a kwok cluster needs in the test binary directory.
var Binaries = []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// ErrMissingBinaries is returned (wrapped) by Start when the test binary directory lacks one of
// Binaries.
var ErrMissingBinaries = errors.New("test binaries missing")

// CacheDir is olmguard's cache outside the clone, as hack/test-binaries.sh computes it:
// ${OLMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/olmguard}.
func CacheDir() string {
	if d := os.Getenv("OLMGUARD_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "olmguard")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "olmguard-cache")
	}
	return filepath.Join(home, ".cache", "olmguard")
}

// WorkDir is kwokctl's working directory for olmguard's clusters (KWOK_WORKDIR): kwokctl keeps each
// cluster under WorkDir()/clusters/<name> (kubeconfig.yaml, pki, etcd data, logs/, pids/).
// It is separate from ~/.kwok so that a personal kwokctl configuration does not leak in.
func WorkDir() string { return filepath.Join(CacheDir(), "kwok") }

// KubeconfigPath is where kwokctl writes the admin kubeconfig of the named cluster.
func KubeconfigPath(name string) string {
	return filepath.Join(kwokClusterDir(name), "kubeconfig.yaml")
}

func kwokClusterDir(name string) string { return filepath.Join(WorkDir(), "clusters", name) }

// ownDir holds what test/cluster renders for one cluster: kwokctl.yaml, node-heartbeat.yaml and the
// kubectl stand-in. kwokctl deletes its own cluster directory, so this one lives beside it.
func ownDir(name string) string { return filepath.Join(WorkDir(), "olmguard", name) }

// noKubeconfig is a kubeconfig file that does not exist, for `kwokctl delete cluster --kubeconfig`:
// kwokctl removes the cluster's context from that file (default ~/.kube/config, which test/cluster
// never touches) and rejects an empty path.
func noKubeconfig() string { return filepath.Join(WorkDir(), "olmguard", "no-such-kubeconfig") }

// kwokctl runs the kwokctl binary for one cluster.
type kwokctl struct {
	name          string
	binDir        string
	apiServerArgs map[string]string // Options.APIServerArgs
	ports         *portBlock        // claimed by create, given up by delete
}

func (k kwokctl) bin() string { return filepath.Join(k.binDir, "kwokctl") }

// env is the environment kwokctl and the components it forks run with: no KWOK_* variable from the
// caller (they override the configuration file), olmguard's KWOK_WORKDIR, and the kubectl stand-in
// first on PATH.
func (k kwokctl) env() []string {
	var env []string
	path := ""
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "KWOK_"), strings.HasPrefix(kv, envShim+"="):
		case strings.HasPrefix(kv, "PATH="):
			path = strings.TrimPrefix(kv, "PATH=")
		default:
			env = append(env, kv)
		}
	}
	shimDir := filepath.Join(ownDir(k.name), "bin")
	if path != "" {
		shimDir += string(os.PathListSeparator) + path
	}
	return append(env, "PATH="+shimDir, "KWOK_WORKDIR="+WorkDir(), envShim+"=1")
}

// run runs kwokctl --name <name> args...; its output is returned with the error on failure.
func (k kwokctl) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, k.bin(), append([]string{"--name", k.name}, args...)...)
	cmd.Env = k.env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// Components are forked with their output in log files, but never wait on a stray pipe holder.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// exists reports whether kwokctl knows the cluster (its saved configuration is there).
func (k kwokctl) exists() bool {
	_, err := os.Stat(filepath.Join(kwokClusterDir(k.name), "kwok.yaml"))
	return err == nil
}

// create claims the cluster's ports (claimPorts), renders the configuration and runs `kwokctl create
// cluster`. For a cluster that exists but is not running kwokctl starts its components again.
func (k *kwokctl) create(ctx context.Context) error {
	if k.ports == nil {
		ports, err := claimPorts(ctx, k.name, k.exists())
		if err != nil {
			return err
		}
		k.ports = ports
	}
	if err := k.prepare(); err != nil {
		return err
	}
	unlock, err := lockFile(ctx, createLockPath())
	if err != nil {
		return err
	}
	defer unlock()
	return k.run(ctx, "--config", filepath.Join(ownDir(k.name), "kwokctl.yaml"),
		"create", "cluster",
		"--kubeconfig=", // do not touch ~/.kube/config
		"--timeout=5m")
}

// delete runs `kwokctl delete cluster` (nothing happens for a cluster that does not exist), removes
// test/cluster's own files for it and, once no component is left, gives its ports up.
func (k *kwokctl) delete(ctx context.Context) error {
	err := k.run(ctx, "delete", "cluster", "--kubeconfig="+noKubeconfig())
	if err == nil {
		err = killLeftovers(ctx, kwokClusterDir(k.name)+string(filepath.Separator))
	}
	if err == nil {
		err = os.RemoveAll(ownDir(k.name))
	}
	if err == nil {
		k.ports.release()
		k.ports = nil
	}
	return err
}

// killLeftovers kills the processes whose command line names dir (every component of a cluster is
// started with its certificates or data under the cluster's directory) and waits until they are
// gone. kwokctl stops a component by the pid file it wrote once the component started: one still
// starting when its create was abandoned (a slow kube-apiserver on a busy machine) outlives the
// delete, keeps the cluster's port with the old certificates, and fails every later attempt to
// create the cluster again with "served by another cluster's kube-apiserver".
func killLeftovers(ctx context.Context, dir string) error {
	for {
		pids := procs.CommandLinesWith(dir)
		if len(pids) == 0 {
			return nil
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("processes %v of %s still running: %w", pids, dir, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// prepare writes the cluster's own files (its ports claimed): the rendered kwokctl.yaml, node-heartbeat.yaml and the
// kubectl stand-in (a link to the running executable, see kubectl.go).
func (k *kwokctl) prepare() error {
	root, err := testbin.RepoRoot()
	if err != nil {
		return fmt.Errorf("finding the olmguard checkout (hack/kwok): %w", err)
	}
	dir := ownDir(k.name)
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	shim := filepath.Join(dir, "bin", "kubectl")
	_ = os.Remove(shim)
	if err := os.Symlink(self, shim); err != nil {
		return err
	}
	stage, err := os.ReadFile(filepath.Join(root, "hack", "kwok", "node-heartbeat.yaml"))
	if err != nil {
		return err
	}
	stagePath := filepath.Join(dir, "node-heartbeat.yaml")
	if err := os.WriteFile(stagePath, stage, 0o644); err != nil {
		return err
	}
	vars, err := readVersions(filepath.Join(root, "hack", "versions.env"))
	if err != nil {
		return err
	}
	for name, port := range k.ports.vars() {
		vars[name] = port
	}
	vars["BIN_DIR"] = k.binDir
	vars["KUBECTL"] = shim
	vars["NODE_HEARTBEAT_STAGE"] = stagePath
	tmpl, err := os.ReadFile(filepath.Join(root, "hack", "kwok", "kwokctl.yaml"))
	if err != nil {
		return err
	}
	conf, err := render(string(tmpl), vars)
	if err != nil {
		return fmt.Errorf("hack/kwok/kwokctl.yaml: %w", err)
	}
	if conf, err = withAPIServerArgs(conf, k.apiServerArgs); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kwokctl.yaml"), []byte(conf), 0o644)
}

// placeholder is ${NAME} in a template.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// render replaces the ${NAME} placeholders of a template; values are escaped for a double-quoted
// YAML string and an unknown name is an error.
func render(tmpl string, vars map[string]string) (string, error) {
	var unknown []string
	out := placeholder.ReplaceAllStringFunc(tmpl, func(m string) string {
		name := placeholder.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			unknown = append(unknown, name)
			return m
		}
		return strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v)
	})
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return "", fmt.Errorf("unknown placeholders %v", unknown)
	}
	return out, nil
}

// readVersions reads the KEY=VALUE lines of hack/versions.env.
func readVersions(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: bad line %q", path, line)
		}
		vars[strings.TrimSpace(k)] = strings.Trim(strings.TrimSpace(v), `"'`)
	}
	return vars, sc.Err()
}

// createLockPath is the flock every kwokctl create of the machine takes: one create at a time in
// the shared work directory.
func createLockPath() string { return filepath.Join(WorkDir(), ".create.lock") }

// startWatchdog starts a detached shell that deletes the cluster once process pid is gone, so that
// a test binary killed by a timeout, a panic in a test or a signal leaves nothing running. The
// caller kills it after deleting the cluster itself.
func (k kwokctl) startWatchdog(pid int) (*exec.Cmd, error) {
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done
"$2" --name "$3" delete cluster --kubeconfig="$5" >/dev/null 2>&1
rm -rf "$4"`
	cmd := exec.Command("/bin/sh", "-c", script, "olmguard-cluster-watchdog",
		strconv.Itoa(pid), k.bin(), k.name, ownDir(k.name), noKubeconfig())
	cmd.Env = k.env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	// No stdio: `go test` waits for whatever holds its pipes.
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

// clusterNames lists the clusters in WorkDir.
func clusterNames() []string { return dirNames(filepath.Join(WorkDir(), "clusters")) }

// apiServerPatch starts the kube-apiserver's extraArgs in hack/kwok/kwokctl.yaml.
const apiServerPatch = "- name: kube-apiserver\n  extraArgs:\n"

// withAPIServerArgs adds args to the kube-apiserver's extraArgs of a rendered configuration, in
// name order.
func withAPIServerArgs(conf string, args map[string]string) (string, error) {
	if len(args) == 0 {
		return conf, nil
	}
	if strings.Count(conf, apiServerPatch) != 1 {
		return "", fmt.Errorf("hack/kwok/kwokctl.yaml: no single kube-apiserver extraArgs to add %v to", args)
	}
	names := make([]string, 0, len(args))
	for n := range args {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	esc := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	for _, n := range names {
		fmt.Fprintf(&b, "  - key: \"%s\"\n    value: \"%s\"\n", esc.Replace(n), esc.Replace(args[n]))
	}
	return strings.Replace(conf, apiServerPatch, apiServerPatch+b.String(), 1), nil
}
