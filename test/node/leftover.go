package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/olmguard/olmguard/test/procs"
)

// cniNetwork is the name of the node's CNI network: the bridge plugin writes it into the comment
// of every iptables rule it adds, and host-local keeps its IP allocations under it.
const cniNetwork = "olmguard-node"

// reclaimLeftover removes what a node of this name left on the host when the run that started it
// was killed before Stop (SIGKILL, a test binary's timeout, a restarted sandbox). Its processes
// are gone, but the kernel keeps its mounts, pod cgroups, network namespaces, bridge and iptables
// rules, and the disk its directory and IP allocations; when only the test binary was killed, its
// runc shims and their containers still run. Left there, they fail the next start, or worse, its
// stale DNAT rule sends the next node's pods to an apiserver that no longer listens. A directory
// a live kubelet or containerd (any process but a shim) still names belongs to a running node,
// and is refused.
func (n *Node) reclaimLeftover() error {
	if _, err := os.Stat(n.dir); err != nil {
		return nil
	}
	if pids := nodeProcesses(n.dir); len(pids) > 0 {
		return fmt.Errorf("%s is in use by processes %v: a node of that name runs (stop it first)", n.dir, pids)
	}
	n.logf("%s is left from a run that ended without tearing its node down: reclaiming it", n.dir)
	killShims(n.containerdSocket())
	removeCgroups()
	unmountUnder(n.dir)
	removeUnusedNetns()
	removeLogLinksInto(n.dir)
	_ = os.RemoveAll(filepath.Join("/var/lib/cni/networks", cniNetwork))
	_ = exec.Command("ip", "link", "del", n.bridge).Run()
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		if err := dropNodeRules(save, n.opts.PodCIDR); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(n.dir); err != nil {
		return fmt.Errorf("removing the leftover %s: %w", n.dir, err)
	}
	return nil
}

// nodeProcesses lists the processes that name dir other than runc shims: a killed test binary
// takes its kubelet and containerd with it (Pdeathsig), but the shims outlive containerd by
// design, each with its containers; without a containerd they serve nobody.
func nodeProcesses(dir string) []int {
	var out []int
	for _, pid := range procs.CommandLinesWith(dir) {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != "containerd-shim-runc-v2" {
			out = append(out, pid)
		}
	}
	return out
}

// removeUnusedNetns removes the CNI network namespaces no process has entered: a pod's
// namespace lives on as a bind mount after its processes die.
func removeUnusedNetns() {
	used := map[uint64]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if ino, ok := inode(filepath.Join("/proc", e.Name(), "ns", "net")); ok {
			used[ino] = true
		}
	}
	for name := range dirNames("/var/run/netns") {
		path := filepath.Join("/var/run/netns", name)
		if ino, ok := inode(path); strings.HasPrefix(name, "cni-") && ok && !used[ino] {
			_ = syscall.Unmount(path, syscall.MNT_DETACH)
			_ = os.Remove(path)
		}
	}
}

func inode(path string) (uint64, bool) {
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, false
	}
	return st.Ino, true
}

// removeLogLinksInto removes the kubelet's /var/log/containers links that point under dir.
func removeLogLinksInto(dir string) {
	for name := range dirNames("/var/log/containers") {
		link := filepath.Join("/var/log/containers", name)
		if target, err := os.Readlink(link); err == nil && strings.HasPrefix(target, dir+"/") {
			_ = os.Remove(link)
		}
	}
}

// dropNodeRules rewrites each table that holds rules of a node (see withoutNodeRules) without
// them, through iptables-restore, which parses the dump's quoting as iptables-save wrote it.
func dropNodeRules(save, podCIDR string) error {
	out, err := exec.Command(save).Output()
	if err != nil {
		if save == "iptables-save" {
			return fmt.Errorf("%s: %w", save, err)
		}
		return nil // no IPv6 tables on this host
	}
	kept := withoutNodeRules(string(out), podCIDR)
	if kept == string(out) {
		return nil
	}
	r := exec.Command(strings.TrimSuffix(save, "-save") + "-restore")
	r.Stdin = strings.NewReader(kept)
	if out, err := r.CombinedOutput(); err != nil {
		return fmt.Errorf("removing a leftover node's iptables rules: %w: %s", err, out)
	}
	return nil
}

// withoutNodeRules is an iptables-save dump without the rules a node adds: those the CNI bridge
// plugin tags with the node's network name, the DNAT rule that routes the pod range to the
// apiserver (routeAPIServer), and the chains only those rules used. Tables it does not change
// are left out, so restoring the result rewrites only the tables that held such rules.
func withoutNodeRules(dump, podCIDR string) string {
	tag := fmt.Sprintf(`name: \"%s\"`, cniNetwork)
	dnat := fmt.Sprintf("-s %s -d %s/32 -p tcp", podCIDR, KubernetesServiceIP)
	var out []string
	for _, table := range splitTables(dump) {
		dropped, keptRef := map[string]bool{}, map[string]bool{}
		var kept []string
		for _, line := range table {
			if !strings.HasPrefix(line, "-A ") {
				kept = append(kept, line)
				continue
			}
			chain, _, _ := strings.Cut(strings.TrimPrefix(line, "-A "), " ")
			if strings.Contains(line, tag) || (strings.Contains(line, dnat) && strings.Contains(line, "-j DNAT")) {
				dropped[chain] = true
				continue
			}
			keptRef[chain] = true
			if _, target, ok := strings.Cut(line, " -j "); ok {
				name, _, _ := strings.Cut(target, " ")
				keptRef[name] = true
			}
			kept = append(kept, line)
		}
		if len(dropped) == 0 {
			continue
		}
		var final []string
		for _, line := range kept {
			if name, ok := chainDeclared(line); ok && dropped[name] && !keptRef[name] && !builtinChains[name] {
				continue
			}
			final = append(final, line)
		}
		out = append(out, final...)
	}
	if len(out) == 0 {
		return dump
	}
	return strings.Join(out, "\n") + "\n"
}

// splitTables cuts an iptables-save dump into its tables, each from "*name" to "COMMIT".
func splitTables(dump string) [][]string {
	var tables [][]string
	var cur []string
	for _, line := range strings.Split(dump, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			cur = []string{line}
		case cur == nil:
		case line == "COMMIT":
			tables = append(tables, append(cur, line))
			cur = nil
		default:
			cur = append(cur, line)
		}
	}
	return tables
}

func chainDeclared(line string) (string, bool) {
	if !strings.HasPrefix(line, ":") {
		return "", false
	}
	name, _, _ := strings.Cut(line[1:], " ")
	return name, true
}
