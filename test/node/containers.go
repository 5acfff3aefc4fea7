package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/olmguard/olmguard/test/procs"
)

// Container is one running container of a pod on the node, found through its cgroup.
type Container struct {
	Pod, Name string
	// memory is the container's cgroup directory in the memory hierarchy (v1) or the unified one.
	memory string
	// rel is the directory relative to its hierarchy's root (v1: the same in every controller).
	rel string
	v2  bool
}

// ContainerOf finds the running container name of pod (its current instance, by the ID the pod's
// status reports) on the host.
func ContainerOf(pod *corev1.Pod, name string) (*Container, error) {
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == name && s.State.Running != nil {
			_, id, _ = strings.Cut(s.ContainerID, "://")
		}
	}
	if id == "" {
		return nil, fmt.Errorf("pod %s/%s has no running container %s", pod.Namespace, pod.Name, name)
	}
	// The kubelet's cgroupfs layout: kubepods[/<qos>]/pod<uid>/<container id>.
	for _, root := range []struct {
		dir string
		v2  bool
	}{{"/sys/fs/cgroup/memory", false}, {"/sys/fs/cgroup", true}} {
		for _, pattern := range []string{"kubepods/pod%s/%s", "kubepods/*/pod%s/%s"} {
			found, _ := filepath.Glob(filepath.Join(root.dir, fmt.Sprintf(pattern, pod.UID, id)))
			if len(found) == 1 {
				if _, err := os.Stat(filepath.Join(found[0], "cgroup.procs")); err == nil {
					rel, _ := filepath.Rel(root.dir, found[0])
					return &Container{Pod: pod.Name, Name: name, memory: found[0], rel: rel, v2: root.v2}, nil
				}
			}
		}
	}
	return nil, fmt.Errorf("no cgroup for container %s (%s) of pod %s/%s", name, id, pod.Namespace, pod.Name)
}

// WorkingSet is the container's memory working set as the kubelet reports it (and an OOM kill
// judges it): usage less the inactive file cache, which the kernel reclaims first.
func (c *Container) WorkingSet() (int64, error) { return procs.CgroupWorkingSet(c.memory, c.v2) }

// CPUTime is the CPU time the container's processes have used so far.
func (c *Container) CPUTime() (time.Duration, error) {
	if !c.v2 {
		ns, err := procs.ReadCgroupInt(filepath.Join("/sys/fs/cgroup/cpuacct", c.rel, "cpuacct.usage"))
		return time.Duration(ns), err
	}
	stat, err := os.ReadFile(filepath.Join(c.memory, "cpu.stat"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(stat), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == "usage_usec" {
			us, err := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond, err
		}
	}
	return 0, fmt.Errorf("no usage_usec in %s/cpu.stat", c.memory)
}

// Kill sends SIGKILL to every process of the container, as a crash or the loss of its node would
// end it: no signal handler runs, nothing is released.
func (c *Container) Kill() error {
	b, err := os.ReadFile(filepath.Join(c.memory, "cgroup.procs"))
	if err != nil {
		return err
	}
	pids := strings.Fields(string(b))
	if len(pids) == 0 {
		return fmt.Errorf("container %s of pod %s runs no process", c.Name, c.Pod)
	}
	var errs []error
	for _, f := range pids {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("cgroup.procs of %s: %w", c.memory, err)
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("killing %d: %w", pid, err))
		}
	}
	return errors.Join(errs...)
}
