package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// Component names, as kwokctl calls them.
const (
	Etcd                  = "etcd"
	KubeAPIServer         = "kube-apiserver"
	KubeControllerManager = "kube-controller-manager"
	KubeScheduler         = "kube-scheduler"
	KwokController        = "kwok-controller"
)

// component is a process of kwokctl's binary runtime, as kwokctl saved it in the cluster's
// kwok.yaml.
type component struct {
	Name    string   `json:"name"`
	Binary  string   `json:"binary"`
	Args    []string `json:"args"`
	WorkDir string   `json:"workDir"`
	Envs    []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"envs"`
}

// The binary runtime keeps <workDir>/pids/<binary>.pid and <workDir>/logs/<binary>.log per process.
func (p component) file(kind, ext string) string {
	base := strings.TrimSuffix(filepath.Base(p.Binary), filepath.Ext(p.Binary))
	return filepath.Join(p.WorkDir, kind, base+ext)
}

func (c *Cluster) component(name string) (component, error) {
	if !c.managed {
		return component{}, ErrNotKwok
	}
	data, err := os.ReadFile(filepath.Join(kwokClusterDir(c.Name), "kwok.yaml"))
	if err != nil {
		return component{}, err
	}
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var conf struct {
			Kind       string      `json:"kind"`
			Components []component `json:"components"`
		}
		if err := yaml.Unmarshal(doc, &conf); err != nil || conf.Kind != "KwokctlConfiguration" {
			continue
		}
		for _, p := range conf.Components {
			if p.Name == name {
				return p, nil
			}
		}
	}
	return component{}, fmt.Errorf("cluster %s has no component %q", c.Name, name)
}

// LogPath returns the log file of a component (e.g. KubeControllerManager).
func (c *Cluster) LogPath(name string) (string, error) {
	p, err := c.component(name)
	if err != nil {
		return "", err
	}
	return p.file("logs", ".log"), nil
}

// ComponentRunning reports whether a component's process runs.
func (c *Cluster) ComponentRunning(name string) (bool, error) {
	p, err := c.component(name)
	if err != nil {
		return false, err
	}
	pid, err := readPid(p.file("pids", ".pid"))
	return err == nil && procs.Alive(pid), nil
}

// StopComponent kills a component's process (SIGKILL, like `kwokctl stop cluster`, i.e. a crash)
// and waits until it is gone. kwokctl v0.8.0 has no command for a single component, so this follows
// its binary runtime's layout (pid file in <cluster>/pids), which keeps `kwokctl delete cluster`
// and StartComponent working. Stopping a stopped component is fine.
func (c *Cluster) StopComponent(ctx context.Context, name string) error {
	p, err := c.component(name)
	if err != nil {
		return err
	}
	pidFile := p.file("pids", ".pid")
	pid, err := readPid(pidFile)
	if err != nil {
		return nil // not running
	}
	if procs.Alive(pid) {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
			return fmt.Errorf("stopping %s: %w", name, err)
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testenv.Patience, true, func(context.Context) (bool, error) {
			return !procs.Alive(pid), nil
		})
		if err != nil {
			return fmt.Errorf("stopping %s (pid %d): %w", name, pid, err)
		}
	}
	c.logf("cluster %s: stopped %s", c.Name, name)
	return os.Remove(pidFile)
}

// StartComponent starts a stopped component again, with kwokctl's command line, environment, log
// file and pid file; for kube-apiserver it also waits until it is ready. Starting a running
// component does nothing.
func (c *Cluster) StartComponent(ctx context.Context, name string) error {
	p, err := c.component(name)
	if err != nil {
		return err
	}
	pidFile := p.file("pids", ".pid")
	if pid, err := readPid(pidFile); err == nil && procs.Alive(pid) {
		return nil
	}
	logFile, err := os.OpenFile(p.file("logs", ".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Dir = p.WorkDir
	cmd.Env = c.kwok.env()
	for _, e := range p.Envs {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it should it exit while this process runs
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	c.logf("cluster %s: started %s (pid %d)", c.Name, name, cmd.Process.Pid)
	if name == KubeAPIServer {
		return c.waitServing(ctx)
	}
	return nil
}

// StartExited starts again each component kwokctl started that has exited, once the
// kube-apiserver serves, and returns their names. kube-controller-manager and kube-scheduler give
// up when the kube-apiserver is not healthy within about ten seconds of their start, and kwokctl's
// binary runtime never starts them again: on a busy machine (CI's two cores running four lanes) a
// cluster was left without its controller manager, and its nodes kept their not-ready taint.
func (c *Cluster) StartExited(ctx context.Context) ([]string, error) {
	var started []string
	for _, name := range []string{KubeControllerManager, KubeScheduler, KwokController} {
		running, err := c.ComponentRunning(name)
		if err != nil {
			return started, err
		}
		if running {
			continue
		}
		log, err := c.LogPath(name)
		if err != nil {
			return started, err
		}
		c.logf("cluster %s: %s exited after its start (its log: %s): starting it again", c.Name, name, log)
		if err := c.StartComponent(ctx, name); err != nil {
			return started, err
		}
		started = append(started, name)
	}
	return started, nil
}

func readPid(path string) (int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(data)))
}

// maxCreateAttempts is how many times Start creates a cluster whose component lost its port.
const maxCreateAttempts = 3

// portTaken reports whether a component's log says it could not bind its port.
func (c *Cluster) portTaken() bool {
	taken := false
	c.eachLog(func(_ string, data []byte) { taken = taken || bytes.Contains(data, []byte("address already in use")) })
	return taken
}

// eachLog calls fn with the path and contents of every component's log that can be read.
func (c *Cluster) eachLog(fn func(path string, data []byte)) {
	for _, name := range []string{Etcd, KubeAPIServer, KubeControllerManager, KubeScheduler, KwokController} {
		path, err := c.LogPath(name)
		if err != nil {
			continue
		}
		if data, err := os.ReadFile(path); err == nil {
			fn(path, data)
		}
	}
}

// dumpLogs prints the end of every component's log (when creation failed, before deletion).
func (c *Cluster) dumpLogs() {
	c.eachLog(func(path string, data []byte) {
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 25 {
			lines = lines[len(lines)-25:]
		}
		c.logf("--- last lines of %s:\n%s", path, strings.Join(lines, "\n"))
	})
}
