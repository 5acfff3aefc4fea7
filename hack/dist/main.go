// Command dist writes olmguard's release artifacts into a directory (`make dist`): see
// internal/release.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/olmguard/olmguard/internal/release"
	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/test/testbin"
)

func main() {
	defaultRepo, _, _ := strings.Cut(manifests.DefaultImage, ":")
	o := release.Options{Log: os.Stderr}
	platforms := flag.String("platforms", "", "GOOS/GOARCH list, comma separated (default "+fmt.Sprint(release.Platforms)+")")
	flag.StringVar(&o.Out, "o", "dist", "directory to write (emptied first)")
	flag.StringVar(&o.Version, "version", "", "release version, e.g. v0.2.0 (required)")
	flag.StringVar(&o.Commit, "commit", "", "commit built (required)")
	flag.StringVar(&o.ImageRepo, "image-repo", defaultRepo, "image repository the manifests name, tagged with the version")
	flag.StringVar(&o.DownloadURL, "download-url", "", "where the files are published (default https://github.com/olmguard/olmguard/releases/download/<version>)")
	flag.Parse()
	if o.DownloadURL == "" {
		o.DownloadURL = "https://github.com/olmguard/olmguard/releases/download/" + o.Version
	}
	var err error
	if *platforms != "" {
		o.Platforms, err = release.ParsePlatforms(*platforms)
	}
	if err == nil {
		o.Root, err = testbin.RepoRoot()
	}
	if err == nil {
		o.SourceDate, err = release.SourceDate(o.Root, o.Commit)
	}
	if err == nil {
		ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err = release.Build(ctx, o)
		cancel()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "dist: %s written (checksums in %s/%s)\n", o.Out, o.Out, release.ChecksumsFile)
}
