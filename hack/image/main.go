// Command image builds olmguard's container image without a Docker engine, as an OCI image layout
// archive (internal/image): `make image-archive`. Import it into a node's containerd with
// `ctr -n k8s.io images import <archive>`, or load it with `podman load` or `docker load`.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/olmguard/olmguard/internal/image"
	"github.com/olmguard/olmguard/test/testbin"
)

func main() {
	name := flag.String("name", "olmguard.local/olmguard:dev", "image reference recorded in the archive")
	out := flag.String("o", "bin/olmguard-image.tar", "archive to write")
	arch := flag.String("arch", "", "GOARCH of the binaries (default: this machine's)")
	flag.Parse()
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	root, err := testbin.RepoRoot()
	if err == nil {
		err = image.Build(ctx, image.Olmguard, image.Options{Root: root, Name: *name, Arch: *arch, Out: *out, Log: os.Stderr})
	}
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}
