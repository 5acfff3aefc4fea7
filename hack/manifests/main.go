// Command manifests serves the Makefile's manifest targets without a kustomize binary:
//
//	go run ./hack/manifests generate            write manifests/base/webhook-configurations.yaml
//	                                            from registration.Build (`make manifests`)
//	go run ./hack/manifests render [flags]      print an overlay, as `kubectl kustomize` would,
//	                                            with the image replaced (`make deploy`)
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/webhook/registration"
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
		out := fs.String("o", "manifests/base/webhook-configurations.yaml", "file to write")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		b, err := registration.Manifest(registration.DefaultOptions(), admit.Webhooks(setup.DefaultWebhook().Admission()))
		if err != nil {
			return err
		}
		return os.WriteFile(*out, b, 0o644)
	case "render":
		overlay := fs.String("overlay", "self-signed", "overlay: "+strings.Join(manifests.Overlays, " or "))
		image := fs.String("image", "", "image to deploy (default "+manifests.DefaultImage+")")
		components := fs.String("components", "", "comma-separated components to add (servicemonitor)")
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
