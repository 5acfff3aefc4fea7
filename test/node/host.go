package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/procs"
)

// sysctls are the host settings the kubelet and the bridge plugin change.
var sysctls = []string{"vm.overcommit_memory", "kernel.panic", "kernel.panic_on_oops", "net.ipv4.ip_forward", "net.ipv4.conf.all.route_localnet"}

// hostDirs are directories of the host that containerd, the kubelet and the CNI plugins create
// at fixed paths (their state, sockets, IP allocations, log links).
var hostDirs = []string{"/var/lib/cni", "/var/log/containers", "/var/log/pods", "/run/containerd", "/var/run/netns"}

// hostState is what the host looked like before the node started.
type hostState struct {
	sysctls  map[string]string
	iptables map[string]string // iptables-save / ip6tables-save output
	netns    map[string]bool
	logLinks map[string]bool // /var/log/containers
	dirs     map[string]bool // which of hostDirs existed
}

func saveHost() (hostState, error) {
	h := hostState{sysctls: map[string]string{}, iptables: map[string]string{}}
	for _, s := range sysctls {
		b, err := os.ReadFile(sysctlPath(s))
		if err != nil {
			return h, fmt.Errorf("reading %s: %w", s, err)
		}
		h.sysctls[s] = strings.TrimSpace(string(b))
	}
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		out, err := exec.Command(save).Output()
		if err != nil && save == "iptables-save" {
			return h, fmt.Errorf("%s: %w", save, err)
		}
		h.iptables[save] = string(out)
	}
	h.dirs = map[string]bool{}
	for _, d := range hostDirs {
		_, err := os.Stat(d)
		h.dirs[d] = err == nil
	}
	h.netns = dirNames("/var/run/netns")
	h.logLinks = dirNames("/var/log/containers")
	return h, nil
}

func sysctlPath(name string) string { return "/proc/sys/" + strings.ReplaceAll(name, ".", "/") }

func dirNames(dir string) map[string]bool {
	out := map[string]bool{}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		out[e.Name()] = true
	}
	return out
}

// Stop deletes the node's pods through the kubelet (so CNI and the runtime release what each pod
// holds), stops the kubelet and containerd and their shims, and restores the host.
func (n *Node) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var errs []string
	if n.frozen {
		_ = n.kubelet.Process.Signal(syscall.SIGCONT)
		n.frozen = false
	}
	if n.kubelet != nil {
		drainCtx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := n.drain(drainCtx); err != nil {
			errs = append(errs, "draining: "+err.Error())
		}
		cancel()
	}
	stop(n.kubelet)
	_ = n.c.Client.Delete(ctx, &corev1.Node{ObjectMeta: metaName(n.Name)})
	if n.containerd != nil {
		// What the kubelet could not remove, containerd removes through CRI before it stops.
		_ = exec.CommandContext(ctx, "ctr", "-a", n.containerdSocket(), "-n", "k8s.io", "tasks", "ls").Run()
	}
	stop(n.containerd)
	killShims(n.containerdSocket())
	unmountUnder(n.dir)
	removeCgroups()
	for name := range dirNames("/var/run/netns") {
		if !n.host.netns[name] && strings.HasPrefix(name, "cni-") {
			_ = syscall.Unmount(filepath.Join("/var/run/netns", name), syscall.MNT_DETACH)
			_ = os.Remove(filepath.Join("/var/run/netns", name))
		}
	}
	for name := range dirNames("/var/log/containers") {
		if !n.host.logLinks[name] {
			_ = os.Remove(filepath.Join("/var/log/containers", name))
		}
	}
	for _, d := range hostDirs {
		if !n.host.dirs[d] {
			unmountUnder(d)
			_ = os.RemoveAll(d)
		}
	}
	_ = exec.Command("ip", "link", "del", n.bridge).Run()
	if err := n.restoreIPTables(); err != nil {
		errs = append(errs, err.Error())
	}
	for s, v := range n.host.sysctls {
		if err := os.WriteFile(sysctlPath(s), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Sprintf("restoring %s=%s: %v", s, v, err))
		}
	}
	if err := os.RemoveAll(n.dir); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("tearing down node %s: %s", n.Name, strings.Join(errs, "; "))
	}
	return nil
}

// drain cordons the node, deletes every pod bound to it and waits until the kubelet has removed
// them (a ReplicaSet's replacements are not bound here any more).
func (n *Node) drain(ctx context.Context) error {
	cordon := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"unschedulable":true}}`))
	if err := n.c.Client.Patch(ctx, &corev1.Node{ObjectMeta: metaName(n.Name)}, cordon); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := n.c.Client.List(ctx, pods, client.MatchingFields{"spec.nodeName": n.Name}); err != nil {
		return err
	}
	for i := range pods.Items {
		_ = n.c.Client.Delete(ctx, &pods.Items[i])
	}
	return wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		left := &corev1.PodList{}
		err := n.c.Client.List(ctx, left, client.MatchingFields{"spec.nodeName": n.Name})
		return err == nil && len(left.Items) == 0, nil
	})
}

func stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for cmd.ProcessState == nil {
			if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
	}
}

// killShims kills the runc shims of the containerd at socket: they outlive containerd by design.
func killShims(socket string) {
	for _, pid := range procs.CommandLinesWith(socket) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			out = append(out, fields[4])
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

func unmountUnder(dir string) {
	for _, m := range mountsUnder(dir) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}
}

// kubepodsCgroups lists the kubelet's cgroup directories, deepest first.
func kubepodsCgroups() []string {
	var out []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods*")
	more, _ := filepath.Glob("/sys/fs/cgroup/kubepods*")
	for _, r := range append(roots, more...) {
		_ = filepath.WalkDir(r, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, path)
			}
			return nil
		})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// removeCgroups kills what still runs in the pod cgroups (containers whose shim is gone keep
// running) and removes the cgroup directories, which go once they hold no process.
func removeCgroups() {
	for attempt := 0; attempt < 50; attempt++ {
		dirs := kubepodsCgroups()
		if len(dirs) == 0 {
			return
		}
		for _, d := range dirs {
			b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscanf(f, "%d", &pid); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		for _, d := range dirs {
			_ = os.Remove(d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restoreIPTables puts back the rules saved before the node started, table by table; a table
// that had nothing then is flushed and its chains deleted.
func (n *Node) restoreIPTables() error {
	for save, before := range n.host.iptables {
		cmd := strings.TrimSuffix(save, "-save")
		restore := cmd + "-restore"
		tables := map[string]bool{}
		for _, line := range strings.Split(before, "\n") {
			if strings.HasPrefix(line, "*") {
				tables[line[1:]] = true
			}
		}
		if before != "" {
			r := exec.Command(restore)
			r.Stdin = strings.NewReader(before)
			if out, err := r.CombinedOutput(); err != nil {
				return fmt.Errorf("%s: %w: %s", restore, err, out)
			}
		}
		for _, t := range []string{"filter", "nat", "mangle", "raw"} {
			if !tables[t] {
				_ = exec.Command(cmd, "-t", t, "-F").Run()
				_ = exec.Command(cmd, "-t", t, "-X").Run()
			}
		}
	}
	return nil
}

// Leftovers lists what of the node is still on the host: processes, mounts, network namespaces,
// cgroups, iptables rules, sysctls, the bridge, the node's directory. Empty after Stop.
func (n *Node) Leftovers() []string {
	var out []string
	for _, pid := range procs.CommandLinesWith(n.dir) {
		out = append(out, fmt.Sprintf("process %d", pid))
	}
	for _, m := range mountsUnder(n.dir) {
		out = append(out, "mount "+m)
	}
	for name := range dirNames("/var/run/netns") {
		if !n.host.netns[name] {
			out = append(out, "netns "+name)
		}
	}
	for _, d := range kubepodsCgroups() {
		out = append(out, "cgroup "+d)
	}
	for save, before := range n.host.iptables {
		now, _ := exec.Command(save).Output()
		if rules(string(now)) != rules(before) {
			out = append(out, save+" differs from before the node")
		}
	}
	for s, v := range n.host.sysctls {
		if b, err := os.ReadFile(sysctlPath(s)); err == nil && strings.TrimSpace(string(b)) != v {
			out = append(out, fmt.Sprintf("sysctl %s=%s (was %s)", s, strings.TrimSpace(string(b)), v))
		}
	}
	if exec.Command("ip", "link", "show", n.bridge).Run() == nil {
		out = append(out, "link "+n.bridge)
	}
	for _, d := range append([]string{n.dir}, hostDirs...) {
		if _, err := os.Stat(d); err == nil && !n.host.dirs[d] {
			out = append(out, "directory "+d)
		}
	}
	return out
}

// rules is an iptables-save dump without comments and packet counters, and without the tables
// that hold no rule and no chain of their own: the nf_tables backend keeps a table the node made
// even after it is emptied, and an empty table with accepting built-in chains filters nothing.
func rules(dump string) string {
	var out, table []string
	empty := true
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "#") || line == "":
		case strings.HasPrefix(line, "*"):
			table, empty = []string{line}, true
		case line == "COMMIT":
			if !empty {
				out = append(append(out, table...), line)
			}
		case strings.HasPrefix(line, ":"):
			name, rest, _ := strings.Cut(line[1:], " ")
			policy, _, _ := strings.Cut(rest, " ")
			if !builtinChains[name] || policy != "ACCEPT" {
				empty = false
			}
			table = append(table, ":"+name+" "+policy)
		default:
			empty = false
			table = append(table, line)
		}
	}
	return strings.Join(out, "\n")
}

var builtinChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

func metaName(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
