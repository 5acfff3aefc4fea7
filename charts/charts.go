// Package charts holds olmguard's Helm chart (charts/olmguard) and renders it with the Helm Go
// SDK, as `helm template` and `helm install` would. The chart is the source of olmguard's
// manifests: `make manifests` writes the kustomize tree (manifests/) from it (Generate), and
// the chart's webhook configurations from pkg/setup's admission table (WebhookConfigurations).
package charts

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"regexp"
	"sort"
	"strings"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/loader/archive"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	release "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"

	"github.com/olmguard/olmguard/manifests"
)

//go:embed all:olmguard
var files embed.FS

// Name is the chart's name and its directory under charts/.
const Name = "olmguard"

// Dir is the chart's directory relative to the module root.
const Dir = "charts/" + Name

// DefaultReleaseName and DefaultNamespace are those of the README's `helm install`.
const (
	DefaultReleaseName = "olmguard"
	DefaultNamespace   = "olmguard-system"
)

// Load returns the chart as built into this binary.
func Load() (*chart.Chart, error) {
	sub, err := fs.Sub(files, Name)
	if err != nil {
		return nil, err
	}
	return LoadFS(sub)
}

// LoadDir loads the chart from a directory, e.g. a checkout's charts/olmguard.
func LoadDir(dir string) (*chart.Chart, error) { return LoadFS(os.DirFS(dir)) }

// LoadFS loads the chart whose Chart.yaml is at the root of fsys.
func LoadFS(fsys fs.FS) (*chart.Chart, error) {
	var bufs []*archive.BufferedFile
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		bufs = append(bufs, &archive.BufferedFile{Name: p, Data: b})
		return nil
	})
	if err != nil {
		return nil, err
	}
	ch, err := loader.LoadFiles(bufs)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", Name, err)
	}
	return ch, nil
}

// Options say how to render the chart: the release's name and namespace and the values given
// (as with `helm install -f`), merged over the chart's defaults and checked against its schema.
type Options struct {
	ReleaseName string         // default DefaultReleaseName
	Namespace   string         // default DefaultNamespace
	Values      map[string]any // nil: the defaults
	// KubeVersion is the cluster version templates see, as `helm template --kube-version`
	// (default DefaultKubeVersion).
	KubeVersion string
	// SkipSchemaValidation renders without values.schema.json, as `helm install
	// --skip-schema-validation`: the templates' own checks still apply.
	SkipSchemaValidation bool
}

// DefaultKubeVersion is the Kubernetes version rendering assumes without a cluster: the one
// olmguard is built and tested against (hack/versions.env).
const DefaultKubeVersion = "v1.36.0"

func (o Options) withDefaults() Options {
	if o.ReleaseName == "" {
		o.ReleaseName = DefaultReleaseName
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.KubeVersion == "" {
		o.KubeVersion = DefaultKubeVersion
	}
	return o
}

// Templates renders ch as `helm template` does, without a cluster, and returns each template's
// output (after Helm's own checks), keyed by its file name under templates/, e.g. "webhook.yaml".
// Templates that render nothing are left out.
func Templates(ch *chart.Chart, o Options) (map[string]string, error) {
	rel, err := dryRun(ch, o)
	if err != nil {
		return nil, err
	}
	return splitManifest(rel.Manifest, ch.Name())
}

// Hooks renders ch as Templates does and returns its Helm hooks (objects annotated helm.sh/hook,
// which Helm keeps out of the release manifest and Templates), keyed as Templates keys them.
// The kustomize tree (Generate) is built from Templates: no hook reaches it.
func Hooks(ch *chart.Chart, o Options) (map[string]string, error) {
	rel, err := dryRun(ch, o)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, h := range rel.Hooks {
		name, ok := strings.CutPrefix(h.Path, ch.Name()+"/templates/")
		if !ok {
			return nil, fmt.Errorf("hook %s from %s, outside %s/templates", h.Name, h.Path, ch.Name())
		}
		body := strings.TrimRight(strings.TrimPrefix(strings.TrimSpace(h.Manifest), "---\n"), "\n") + "\n"
		if prev, ok := out[name]; ok {
			body = prev + "---\n" + body
		}
		out[name] = body
	}
	return out, nil
}

// Notes renders ch as Templates does and returns what Helm prints after an install
// (templates/NOTES.txt); without a cluster, lookup finds nothing.
func Notes(ch *chart.Chart, o Options) (string, error) {
	rel, err := dryRun(ch, o)
	if err != nil {
		return "", err
	}
	if rel.Info == nil {
		return "", nil
	}
	return rel.Info.Notes, nil
}

func dryRun(ch *chart.Chart, o Options) (*release.Release, error) {
	o = o.withDefaults()
	install := action.NewInstall(action.NewConfiguration(action.ConfigurationSetLogger(slog.DiscardHandler)))
	install.DryRunStrategy = action.DryRunClient
	install.ReleaseName, install.Namespace = o.ReleaseName, o.Namespace
	install.Replace = true
	install.SkipSchemaValidation = o.SkipSchemaValidation
	kv, err := common.ParseKubeVersion(o.KubeVersion)
	if err != nil {
		return nil, err
	}
	install.KubeVersion = kv
	vals := o.Values
	if vals == nil {
		vals = map[string]any{}
	}
	r, err := install.Run(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("rendering chart %s: %w", ch.Name(), err)
	}
	rel, ok := r.(*release.Release)
	if !ok {
		return nil, fmt.Errorf("rendering chart %s: unexpected release type %T", ch.Name(), r)
	}
	return rel, nil
}

var sourceLine = regexp.MustCompile(`(?m)^# Source: (\S+)\n`)

// splitManifest splits a release manifest into its templates' outputs by their "# Source:" lines.
func splitManifest(manifest, chartName string) (map[string]string, error) {
	out := map[string]string{}
	for _, doc := range strings.Split(manifest, "\n---\n") {
		doc = strings.TrimPrefix(strings.TrimSpace(doc), "---\n")
		if doc == "" {
			continue
		}
		m := sourceLine.FindStringSubmatchIndex(doc + "\n")
		if m == nil || m[0] != 0 {
			return nil, fmt.Errorf("a rendered document has no # Source line: %.80q", doc)
		}
		src := doc[m[2]:m[3]]
		name, ok := strings.CutPrefix(src, chartName+"/templates/")
		if !ok {
			return nil, fmt.Errorf("rendered document from %s, outside %s/templates", src, chartName)
		}
		body := strings.TrimPrefix(doc[m[1]:], "\n")
		if prev, ok := out[name]; ok {
			body = prev + "---\n" + body
		}
		out[name] = strings.TrimRight(body, "\n") + "\n"
	}
	return out, nil
}

// Render renders ch as `helm template` does and returns the manifest, its templates in file name
// order, each document after a "# Source: <chart>/templates/<file>" line.
func Render(ch *chart.Chart, o Options) ([]byte, error) {
	tpls, err := Templates(ch, o)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(tpls))
	for n := range tpls {
		names = append(names, n)
	}
	sort.Strings(names)
	var b bytes.Buffer
	for _, n := range names {
		fmt.Fprintf(&b, "---\n# Source: %s/templates/%s\n%s", ch.Name(), n, tpls[n])
	}
	return b.Bytes(), nil
}

// Objects renders ch and decodes the objects, in template file name order.
func Objects(ch *chart.Chart, o Options) ([]*unstructured.Unstructured, error) {
	b, err := Render(ch, o)
	if err != nil {
		return nil, err
	}
	return manifests.Decode(b)
}

// ActionConfig is a Helm action configuration for the cluster of kubeconfig (empty: $KUBECONFIG
// or ~/.kube/config), keeping releases in Secrets of namespace, as the helm command does: for
// action.NewInstall, action.NewUpgrade, action.NewUninstall. Helm's log goes to log (nil: nowhere).
func ActionConfig(kubeconfig, namespace string, log slog.Handler) (*action.Configuration, error) {
	if log == nil {
		log = slog.DiscardHandler
	}
	flags := genericclioptions.NewConfigFlags(true)
	flags.Namespace = &namespace
	if kubeconfig != "" {
		flags.KubeConfig = &kubeconfig
	}
	cfg := action.NewConfiguration(action.ConfigurationSetLogger(log))
	if err := cfg.Init(flags, namespace, "secret"); err != nil {
		return nil, fmt.Errorf("helm configuration for %s: %w", kubeconfig, err)
	}
	return cfg, nil
}

// Package writes the chart as a release archive into dir, as `helm package` does, with its
// version and appVersion set to version (a "v"-prefixed semantic version; the chart version
// drops the "v") and its default image repository set to imageRepo. It returns the archive's path.
func Package(dir, version, imageRepo string) (string, error) {
	ch, err := Load()
	if err != nil {
		return "", err
	}
	ch.Metadata.Version = strings.TrimPrefix(version, "v")
	ch.Metadata.AppVersion = version
	if err := setDefaultRepository(ch, imageRepo); err != nil {
		return "", err
	}
	if err := ch.Validate(); err != nil {
		return "", fmt.Errorf("chart %s %s: %w", ch.Name(), version, err)
	}
	return chartutil.Save(ch, dir)
}

// setDefaultRepository replaces image.repository in values.yaml, keeping its comments.
func setDefaultRepository(ch *chart.Chart, repo string) error {
	img, _ := ch.Values["image"].(map[string]any)
	old, _ := img["repository"].(string)
	if old == "" {
		return errors.New("values.yaml has no image.repository")
	}
	for _, f := range ch.Raw {
		if f.Name != chartutil.ValuesfileName {
			continue
		}
		line := "\n  repository: " + old + "\n"
		if strings.Count(string(f.Data), line) != 1 {
			return fmt.Errorf("values.yaml: want one line %q", strings.TrimSpace(line))
		}
		f.Data = []byte(strings.Replace(string(f.Data), line, "\n  repository: "+repo+"\n", 1))
		img["repository"] = repo
		return nil
	}
	return errors.New("the chart has no values.yaml")
}
