// Package node runs one real Kubernetes node beside a local cluster (test/cluster): containerd,
// runc and a CNI bridge from the host's packages, and a kubelet built at the pinned Kubernetes
// version, as processes the tier owns. Images come from OCI archives imported into containerd; no
// registry is reached. Stop tears everything down and restores what the node changed on the host
// (sysctls, iptables rules); Leftovers says what, if anything, is still there. Start first
// reclaims what a killed run of a node of the same name left on the host.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/cluster"
)

// ErrUnsupported wraps why this host cannot run containers at all.
var ErrUnsupported = errors.New("this host cannot run a real node")

// Options configure a node.
type Options struct {
	// Name of the Node; default "olmguard-node".
	Name string
	// Kubelet is the kubelet binary (hack/test-binaries.sh kubelet).
	Kubelet string
	// Images are OCI archives to import before the kubelet starts; the sandbox image must be one.
	Images []string
	// PodCIDR is the bridge's address range; default 10.88.0.0/16.
	PodCIDR string
	// Log receives progress lines; default os.Stderr.
	Log io.Writer
}

// Node is a running node.
type Node struct {
	Name string
	IP   string // the host's address the node registers with

	opts       Options
	dir        string
	bridge     string
	c          *cluster.Cluster
	containerd *exec.Cmd
	kubelet    *exec.Cmd
	frozen     bool // the kubelet is stopped by FreezeKubelet
	host       hostState
}

// hostTools are the host's programs the node needs, from Debian's containerd, runc,
// containernetworking-plugins and iptables packages (.ci/run installs them).
var hostTools = []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "iptables-save", "iptables-restore", "ip"}

// Supported returns nil when this host can run the node, or an error wrapping ErrUnsupported
// that says why not.
func Supported() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: it must run as root (containerd, the kubelet and CNI change the host)", ErrUnsupported)
	}
	for _, t := range hostTools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%w: %s is not installed (apt-get install containerd runc containernetworking-plugins iptables iproute2)", ErrUnsupported, t)
		}
	}
	for _, p := range []string{"bridge", "host-local", "portmap", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, p)); err != nil {
			return fmt.Errorf("%w: CNI plugin %s missing in %s (apt-get install containernetworking-plugins)", ErrUnsupported, p, cniBinDir)
		}
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory"); err != nil {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			return fmt.Errorf("%w: no cgroup filesystem at /sys/fs/cgroup", ErrUnsupported)
		}
	}
	return nil
}

// Start brings the node up against c and waits until the Node is Ready.
func Start(ctx context.Context, c *cluster.Cluster, o Options) (*Node, error) {
	if err := Supported(); err != nil {
		return nil, err
	}
	if o.Name == "" {
		o.Name = "olmguard-node"
	}
	if o.PodCIDR == "" {
		o.PodCIDR = "10.88.0.0/16"
	}
	if o.Log == nil {
		o.Log = os.Stderr
	}
	ip, err := hostIP()
	if err != nil {
		return nil, err
	}
	n := &Node{Name: o.Name, IP: ip, opts: o, c: c, dir: filepath.Join(os.TempDir(), "olmguard-node-"+o.Name), bridge: "olmg0"}
	if err := n.reclaimLeftover(); err != nil {
		return nil, err
	}
	if n.host, err = saveHost(); err != nil {
		return nil, err
	}
	if err := n.start(ctx); err != nil {
		n.logf("start failed, tearing down: %v", err)
		_ = n.Stop()
		return nil, err
	}
	return n, nil
}

func (n *Node) logf(format string, args ...any) {
	fmt.Fprintf(n.opts.Log, "[node] "+format+"\n", args...)
}

func (n *Node) start(ctx context.Context) error {
	started := time.Now()
	for _, d := range []string{"containerd/root", "containerd/state", "cni", "kubelet/pki", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
			return err
		}
	}
	files := map[string]string{
		"containerd.toml":          n.containerdConfig(),
		"cni/10-olmguard.conflist": n.cniConfig(),
		"kubelet.yaml":             n.kubeletConfig(),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	var err error
	if n.containerd, err = n.run("containerd", "containerd", "--config", filepath.Join(n.dir, "containerd.toml")); err != nil {
		return err
	}
	if err := waitSocket(ctx, n.containerdSocket()); err != nil {
		return fmt.Errorf("containerd did not serve %s: %w (log: %s)", n.containerdSocket(), err, n.logPath("containerd"))
	}
	for _, img := range n.opts.Images {
		out, err := exec.CommandContext(ctx, "ctr", "-a", n.containerdSocket(), "-n", "k8s.io", "images", "import", "--all-platforms", img).CombinedOutput()
		if err != nil {
			return fmt.Errorf("importing %s: %w\n%s", img, err, out)
		}
	}
	if err := n.routeAPIServer(); err != nil {
		return err
	}
	if n.kubelet, err = n.run("kubelet", n.opts.Kubelet, n.kubeletArgs(n.c.Kubeconfig)...); err != nil {
		return err
	}
	if err := n.waitReady(ctx, time.Time{}); err != nil {
		return fmt.Errorf("node %s not Ready: %w (kubelet log: %s)", n.Name, err, n.logPath("kubelet"))
	}
	n.logf("node %s Ready in %s (kubelet, containerd; logs in %s)", n.Name, time.Since(started).Round(100*time.Millisecond), n.dir)
	return nil
}

func (n *Node) logPath(name string) string { return filepath.Join(n.dir, name+".log") }

// run starts a process of the node, its output in <dir>/<name>.log. It dies with the test binary.
func (n *Node) run(name, bin string, args ...string) (*exec.Cmd, error) {
	f, err := os.OpenFile(n.logPath(name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait(); f.Close() }()
	return cmd, nil
}

// waitReady waits until the Node is Ready with a heartbeat newer than after.
func (n *Node) waitReady(ctx context.Context, after time.Time) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		node := &corev1.Node{}
		if err := n.c.Client.Get(ctx, client.ObjectKey{Name: n.Name}, node); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue && c.LastHeartbeatTime.After(after), nil
			}
		}
		return false, nil
	})
}

func waitSocket(ctx context.Context, path string) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		conn, err := net.Dial("unix", path)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
}

// hostIP is the address of the host's default route interface: the kubelet registers it, and the
// apiserver reaches the kubelet there.
func hostIP() (string, error) {
	out, err := exec.Command("ip", "-4", "-o", "route", "get", "1.1.1.1").Output()
	if err == nil {
		f := strings.Fields(string(out))
		for i, w := range f {
			if w == "src" && i+1 < len(f) {
				return f[i+1], nil
			}
		}
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String(), nil
		}
	}
	return "", fmt.Errorf("%w: no non-loopback IPv4 address", ErrUnsupported)
}

// KubernetesServiceIP is the kubernetes Service's ClusterIP in the local cluster.
const KubernetesServiceIP = "10.0.0.1"

// routeAPIServer lets pods reach the apiserver as the kubernetes Service (what in-cluster clients
// use) with no kube-proxy: a DNAT rule from the pod range to the apiserver on loopback, which the
// kernel routes only with route_localnet (both undone by Stop, which restores iptables and
// sysctls).
func (n *Node) routeAPIServer() error {
	u, err := url.Parse(n.c.Config.Host)
	if err != nil {
		return err
	}
	if err := os.WriteFile(sysctlPath("net.ipv4.conf.all.route_localnet"), []byte("1"), 0o644); err != nil {
		return err
	}
	rule := []string{"-t", "nat", "-A", "PREROUTING", "-s", n.opts.PodCIDR, "-d", KubernetesServiceIP, "-p", "tcp", "--dport", "443",
		"-j", "DNAT", "--to-destination", u.Host}
	if out, err := exec.Command("iptables", rule...).CombinedOutput(); err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(rule, " "), err, out)
	}
	return nil
}

// FreezeKubelet stops the kubelet's process (SIGSTOP): to the control plane the node is lost,
// while its containers keep running and no container that dies is restarted. ThawKubelet
// resumes it.
func (n *Node) FreezeKubelet() error {
	if n.kubelet == nil || n.kubelet.Process == nil {
		return errors.New("the kubelet is not running")
	}
	n.frozen = true
	return n.kubelet.Process.Signal(syscall.SIGSTOP)
}

// ThawKubelet resumes a frozen kubelet and waits until the Node reports Ready again with a
// heartbeat from after the thaw.
func (n *Node) ThawKubelet(ctx context.Context) error {
	if !n.frozen {
		return nil
	}
	thawed := time.Now()
	if err := n.kubelet.Process.Signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.frozen = false
	return n.waitReady(ctx, thawed)
}

// PodLogs returns what container of pod has written, every instance of it in order, from the
// kubelet's pod log directory (<podLogsDir>/<namespace>_<name>_<uid>/<container>/<restart>.log,
// each line in the CRI log format: time, stream, tag, message).
func (n *Node) PodLogs(pod *corev1.Pod, container string) (string, error) {
	dir := filepath.Join(n.dir, "pod-logs", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), container)
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return "", fmt.Errorf("no log of container %s of pod %s/%s in %s", container, pod.Namespace, pod.Name, dir)
	}
	// <restart>.log: 0.log, 1.log, ... sorted by their number, not as strings (10 after 9).
	sort.Slice(files, func(i, j int) bool { return restartOf(files[i]) < restartOf(files[j]) })
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

func restartOf(logFile string) int {
	n, _ := strconv.Atoi(strings.TrimSuffix(filepath.Base(logFile), ".log"))
	return n
}
