package node

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Ports of the kubelet: not the well-known ones, so a kubelet the host may run is left alone.
const (
	kubeletPort        = 30250
	kubeletHealthzPort = 30248
)

// SandboxImage is the pod sandbox image the tier builds (test/node/pause) and imports.
const SandboxImage = "olmguard.local/pause:test"

// containerdConfig is containerd's configuration: every directory and socket of its own, and the
// CRI settings this host needs. restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE, so runc
// cannot lower a sandbox's oom_score_adj and every sandbox would fail to start.
func (n *Node) containerdConfig() string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q

[grpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(n.dir, "containerd", "root"), filepath.Join(n.dir, "containerd", "state"), n.containerdSocket(),
		SandboxImage, cniBinDir, filepath.Join(n.dir, "cni"))
}

// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
const cniBinDir = "/usr/lib/cni"

// cniConfig is a bridge network of the node's own, masqueraded to the outside.
func (n *Node) cniConfig() string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": %q,
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, cniNetwork, n.bridge, n.opts.PodCIDR)
}

// kubeletConfig is the kubelet's configuration file. The apiserver has no kubelet client
// certificate, so the kubelet lets anonymous requests in (loopback and the tier's own node only).
// Node leases renewed every second: kube-controller-manager calls a node NotReady 8 s after its
// last heartbeat (hack/kwok/kwokctl.yaml), and the kubelet's default renews every 10 s.
func (n *Node) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
cgroupsPerQOS: true
enforceNodeAllocatable: [pods]
failSwapOn: false
failCgroupV1: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %q
nodeLeaseDurationSeconds: 4
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 1s
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {}
staticPodPath: ""
serializeImagePulls: false
resolvConf: ""
clusterDomain: cluster.local
`, n.IP, kubeletPort, kubeletHealthzPort, n.containerdSocket(), filepath.Join(n.dir, "pod-logs"))
}

func (n *Node) containerdSocket() string {
	return filepath.Join(n.dir, "containerd", "containerd.sock")
}

// kubeletArgs are the kubelet's flags: the configuration file and what only flags set.
func (n *Node) kubeletArgs(kubeconfig string) []string {
	return []string{
		"--config=" + filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + filepath.Join(n.dir, "kubelet"),
		"--cert-dir=" + filepath.Join(n.dir, "kubelet", "pki"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--node-labels=" + strings.Join([]string{"olmguard.io/real-node=true"}, ","),
		"--v=1",
	}
}
