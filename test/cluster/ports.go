package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Every cluster owns a block of loopback ports for its whole life, from its create until its
// delete has killed every component: a flock on the block's file in WorkDir()/ports says whose it
// is, so that a cluster of another process (tiers run side by side) never gets them, even while
// one of this cluster's components is stopped or still starting. kwokctl's own choice (probe from
// 32767 down for a port nobody listens on) hands a starting or restarting component's port to the
// next cluster, whose kube-apiserver then answers the first one's clients with another CA.
const (
	portBlockSize = 8
	portsHighest  = 32767 // kwokctl's range; the kernel's ephemeral ports start above it
	portsLowest   = 20000
)

// portBlock is the range [base, base+portBlockSize) and the open, flocked file that claims it.
type portBlock struct {
	base int
	lock *os.File
}

// The components' ports within a block.
const (
	apiServerPortOffset = iota
	etcdPortOffset
	etcdPeerPortOffset
	controllerManagerPortOffset
	schedulerPortOffset
	kwokControllerPortOffset
)

// vars are the block's ports as hack/kwok/kwokctl.yaml's placeholders.
func (b *portBlock) vars() map[string]string {
	port := func(offset int) string { return strconv.Itoa(b.base + offset) }
	return map[string]string{
		"KUBE_APISERVER_PORT":          port(apiServerPortOffset),
		"ETCD_PORT":                    port(etcdPortOffset),
		"ETCD_PEER_PORT":               port(etcdPeerPortOffset),
		"KUBE_CONTROLLER_MANAGER_PORT": port(controllerManagerPortOffset),
		"KUBE_SCHEDULER_PORT":          port(schedulerPortOffset),
		"KWOK_CONTROLLER_PORT":         port(kwokControllerPortOffset),
	}
}

// release gives the block up (nil: nothing to do).
func (b *portBlock) release() {
	if b == nil || b.lock == nil {
		return
	}
	_ = syscall.Flock(int(b.lock.Fd()), syscall.LOCK_UN)
	_ = b.lock.Close()
	b.lock = nil
}

func portBlockPath(base int) string {
	return filepath.Join(WorkDir(), "ports", strconv.Itoa(base)+".lock")
}

// recordedBlockPath is where a cluster notes its block, so that starting it again (a persistent
// cluster, make cluster-up) claims the ports its saved configuration names.
func recordedBlockPath(name string) string { return filepath.Join(ownDir(name), "ports") }

// claimPorts claims a port block for the named cluster: the block it recorded when it exists
// already (waiting while another process holds it), else the highest block that nobody holds,
// that no cluster's saved configuration names and whose ports are all free.
func claimPorts(ctx context.Context, name string, exists bool) (*portBlock, error) {
	if err := os.MkdirAll(filepath.Join(WorkDir(), "ports"), 0o755); err != nil {
		return nil, err
	}
	if exists {
		data, err := os.ReadFile(recordedBlockPath(name))
		if err != nil {
			return nil, fmt.Errorf("cluster %s exists but names no port block (%v): delete it (make cluster-down) and create it again", name, err)
		}
		base, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", recordedBlockPath(name), err)
		}
		lock, err := waitLockFile(ctx, portBlockPath(base))
		if err != nil {
			return nil, fmt.Errorf("cluster %s's ports: %w", name, err)
		}
		return &portBlock{base: base, lock: lock}, nil
	}
	named := portsInSavedConfigs()
	for base := portsHighest - portBlockSize + 1; base >= portsLowest; base -= portBlockSize {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		lock, err := tryLockFile(portBlockPath(base))
		if err != nil {
			return nil, err
		}
		if lock == nil {
			continue // another cluster's
		}
		b := &portBlock{base: base, lock: lock}
		if blockUsable(base, named, portFree) {
			if err := os.MkdirAll(ownDir(name), 0o755); err != nil {
				b.release()
				return nil, err
			}
			if err := os.WriteFile(recordedBlockPath(name), []byte(strconv.Itoa(base)+"\n"), 0o644); err != nil {
				b.release()
				return nil, err
			}
			return b, nil
		}
		b.release()
	}
	return nil, fmt.Errorf("no free block of %d ports between %d and %d", portBlockSize, portsLowest, portsHighest)
}

// blockUsable reports whether no port of the block at base is named by a saved configuration (a
// cluster left running by a process that ended, make cluster-up) or taken (free says no).
func blockUsable(base int, named map[int]bool, free func(int) bool) bool {
	for p := base; p < base+portBlockSize; p++ {
		if named[p] || !free(p) {
			return false
		}
	}
	return true
}

// portFree reports whether nothing listens on port, on loopback or on any address.
func portFree(port int) bool {
	for _, host := range []string{"127.0.0.1", ""} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return false
		}
		_ = l.Close()
	}
	return true
}

// portKey matches a port in kwokctl's saved configuration: option fields (kubeApiserverPort: N,
// port: N, hostPort: N) and addresses in arguments (127.0.0.1:N, --secure-port=N).
var portKey = regexp.MustCompile(`(?i)(?:port"?\s*[:=]\s*"?|127\.0\.0\.1:)(\d{2,5})\b`)

// portsInSavedConfigs lists the ports that the saved configurations of WorkDir's clusters name.
func portsInSavedConfigs() map[int]bool {
	named := map[int]bool{}
	for _, name := range clusterNames() {
		data, err := os.ReadFile(filepath.Join(kwokClusterDir(name), "kwok.yaml"))
		if err != nil {
			continue
		}
		for _, m := range portKey.FindAllSubmatch(data, -1) {
			if p, err := strconv.Atoi(string(m[1])); err == nil {
				named[p] = true
			}
		}
	}
	return named
}

// tryLockFile takes an exclusive flock on path without waiting: nil, nil when another process
// holds it.
func tryLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		return f, nil
	}
	_ = f.Close()
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return nil, nil
	}
	return nil, err
}

// lockFile takes an exclusive flock, waiting until ctx is done.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := waitLockFile(ctx, path)
	if err != nil {
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

// waitLockFile takes an exclusive flock on path, waiting until ctx is done; the open file holds it.
func waitLockFile(ctx context.Context, path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	for {
		f, err := tryLockFile(path)
		if err != nil || f != nil {
			return f, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
