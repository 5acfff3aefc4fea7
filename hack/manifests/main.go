// Command manifests serves the Makefile's manifest targets without a kustomize binary:
//
//	go run ./hack/manifests generate            write the chart's webhook configurations from
//	                                            pkg/setup's admission table, then the kustomize
//	                                            tree (manifests/) from the chart (`make manifests`)
//	go run ./hack/manifests render [flags]      print an overlay, as `kubectl kustomize` would,
//	                                            with the image replaced (`make deploy`)
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/olmguard/olmguard/charts"
	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/setup"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "manifests:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: manifests generate [-o FILE] | render [-overlay NAME] [-image IMAGE] [-components a,b]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "generate":
		root := fs.String("root", ".", "the module's directory")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return generate(*root)
	case "render":
		overlay := fs.String("overlay", "self-signed", "overlay: "+strings.Join(manifests.Overlays, " or "))
		image := fs.String("image", "", "image to deploy (default "+manifests.DefaultImage+")")
		components := fs.String("components", "", "comma-separated components to add (servicemonitor, prometheusrule)")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		var comps []string
		if *components != "" {
			comps = strings.Split(*components, ",")
		}
		b, err := manifests.Render(*overlay, *image, comps...)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// generate writes what charts.Generate returns and removes the kustomize tree's other YAML files,
// which would no longer come from the chart.
func generate(root string) error {
	files, err := charts.Generate(root, admit.Webhooks(setup.DefaultWebhook().Admission()))
	if err != nil {
		return err
	}
	for _, dir := range []string{"base", "overlays", "components"} {
		err := filepath.WalkDir(filepath.Join(root, charts.ManifestsDir, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if _, ok := files[filepath.ToSlash(rel)]; err == nil && !ok {
				fmt.Fprintln(os.Stderr, "removing", rel)
				return os.Remove(p)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	for p, b := range files {
		p = filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
