// Command olmguard-cluster creates and deletes olmguard's local kwok cluster from the cached test
// binaries, with the very configuration the end-to-end tests use (package test/cluster).
// hack/cluster.sh (make cluster-up / cluster-down) runs it.
//
//	olmguard-cluster up [name]          create (or check) the cluster; print its kubeconfig path last
//	olmguard-cluster down [name]        delete it
//	olmguard-cluster kubeconfig [name]  print the kubeconfig path
//
// The default name is "olmguard". Progress goes to stderr, the kubeconfig path to stdout.
// OLMGUARD_BIN_DIR names the binary directory (default: hack/test-binaries.sh dir).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/olmguard/olmguard/test/cluster"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		usage()
	}
	name := "olmguard"
	if len(os.Args) == 3 {
		name = os.Args[2]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()

	switch os.Args[1] {
	case "up":
		c, err := cluster.Start(ctx, cluster.Options{Name: name, Persistent: true})
		if err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "nodes: %v\nuse it with: export KUBECONFIG=%s\n", c.Nodes(), c.Kubeconfig)
		fmt.Println(c.Kubeconfig)
	case "down":
		if err := cluster.Down(ctx, name, ""); err != nil {
			fail(err)
		}
		fmt.Fprintf(os.Stderr, "cluster %s deleted\n", name)
	case "kubeconfig":
		path := cluster.KubeconfigPath(name)
		if _, err := os.Stat(path); err != nil {
			fail(fmt.Errorf("cluster %s does not exist (no %s)", name, path))
		}
		fmt.Println(path)
	default:
		usage()
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "olmguard-cluster: %v\n", err)
	os.Exit(1)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: olmguard-cluster up|down|kubeconfig [name]")
	os.Exit(2)
}
