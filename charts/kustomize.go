package charts

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/common"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/pkg/admit/registration"
)

// The kustomize tree is rendered from the chart: manifests/base is the chart with BaseValues;
// each overlay and component is what the chart renders differently with its values, written as
// kustomize resources (objects only it has) and patches (objects it changes or removes).

// ManifestsDir is the kustomize tree's directory relative to the module root.
const ManifestsDir = "manifests"

// BaseValues are the values manifests/base is rendered with: the chart's defaults, with the
// namespace created by the manifests (kubectl apply -k has no --create-namespace).
func BaseValues() map[string]any {
	return map[string]any{"namespace": map[string]any{"create": true}}
}

// variant is one overlay or component of the kustomize tree and the values it stands for.
type variant struct {
	dir       string // under manifests/
	component bool
	values    map[string]any // over BaseValues
	about     string         // the kustomization's comment
}

var variants = []variant{
	{dir: "overlays/self-signed", about: `olmguard with the webhook's own certificates: it issues a CA and serving certificate, keeps them
in Secret olmguard-webhook-tls, injects the CA into its webhook configurations and rotates them
before expiry. No other add-on needed. The chart's certificate.mode selfSigned, its default: the
same as the base.
  kubectl apply --server-side -k manifests/overlays/self-signed`},
	{dir: "overlays/cert-manager", values: map[string]any{"certificate": map[string]any{"mode": "certManager"}},
		about: `olmguard with its serving certificate issued by cert-manager (which must be installed): a
self-signed Issuer, a Certificate for the webhook Service, the Secret mounted into the webhook
(hot reloaded on renewal) and the CA injected into the webhook configurations by cert-manager's
cainjector through the cert-manager.io/inject-ca-from annotation. The chart's certificate.mode
certManager.
  kubectl apply --server-side -k manifests/overlays/cert-manager`},
	{dir: "components/servicemonitor", component: true, values: map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		about: `Optional: a Prometheus Operator ServiceMonitor for olmguard's metrics (the chart's
serviceMonitor.enabled). Add to an overlay:
  components:
    - ../../components/servicemonitor`},
	{dir: "components/prometheusrule", component: true, values: map[string]any{"prometheusRule": map[string]any{"enabled": true}},
		about: `Optional: a Prometheus Operator PrometheusRule with olmguard's alerts, one per failure it detects
but cannot heal alone (README "Alerts"; the chart's prometheusRule.enabled). The alerts read the
metrics the servicemonitor component scrapes, so add both:
  components:
    - ../../components/servicemonitor
    - ../../components/prometheusrule`},
}

// KustomizeValues returns the chart values that render what kustomize renders for overlay with
// components (manifests.Render): BaseValues and each one's values.
func KustomizeValues(overlay string, components ...string) (map[string]any, error) {
	vals := BaseValues()
	for _, dir := range append([]string{"overlays/" + overlay}, prefixAll("components/", components)...) {
		i := slices.IndexFunc(variants, func(v variant) bool { return v.dir == dir })
		if i < 0 {
			return nil, fmt.Errorf("no chart values for manifests/%s", dir)
		}
		vals = merge(vals, variants[i].values)
	}
	return vals, nil
}

func prefixAll(prefix string, s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = prefix + x
	}
	return out
}

// merge returns a deep copy of a with b's values over it.
func merge(a, b map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range a {
		if m, ok := v.(map[string]any); ok {
			v = merge(m, nil)
		}
		out[k] = v
	}
	for k, v := range b {
		bm, bok := v.(map[string]any)
		am, aok := out[k].(map[string]any)
		switch {
		case bok && aok:
			out[k] = merge(am, bm)
		case bok:
			out[k] = merge(bm, nil)
		default:
			out[k] = v
		}
	}
	return out
}

// Generate returns the files `make manifests` writes, keyed by their path relative to the module
// root: the chart's webhook configurations template from hooks (the admission table), and the
// kustomize tree rendered from the chart at root/charts/olmguard with that template.
func Generate(root string, hooks []registration.Webhook) (map[string][]byte, error) {
	wh, err := WebhookConfigurations(hooks)
	if err != nil {
		return nil, err
	}
	ch, err := LoadDir(filepath.Join(root, Dir))
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(ch.Templates, func(f *common.File) bool { return f.Name == WebhookConfigurationsFile })
	if i < 0 {
		return nil, fmt.Errorf("chart %s has no %s", Dir, WebhookConfigurationsFile)
	}
	ch.Templates[i].Data = wh
	out := map[string][]byte{path.Join(Dir, WebhookConfigurationsFile): wh}
	if err := generateKustomize(ch, out); err != nil {
		return nil, err
	}
	return out, nil
}

// rendered is one chart rendering: its templates' outputs and objects.
type rendered struct {
	templates map[string]string
	objects   map[string]*unstructured.Unstructured // by key()
	source    map[string]string                     // key() -> template
	order     []string                              // keys in template, then document order
}

// KustomizeDropsLabels are Helm's standard labels the kustomize tree leaves out: objects applied
// with kubectl apply -k are not managed by Helm and no chart version installed them, and their
// version is the image's tag, which an overlay's images: may change (a version label would then
// be wrong). app.kubernetes.io/instance stays.
var KustomizeDropsLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/version"}

var helmOnlyLabelLine = regexp.MustCompile(`(?m)^[ \t]*(helm\.sh/chart|app\.kubernetes\.io/managed-by|app\.kubernetes\.io/version): .*\n`)

// forKubectl removes KustomizeDropsLabels from a template's output (the chart writes each as a
// line of a block mapping), and fails when one is still on an object.
func forKubectl(name, text string) (string, []*unstructured.Unstructured, error) {
	text = helmOnlyLabelLine.ReplaceAllString(text, "")
	objs, err := manifests.Decode([]byte(text))
	if err != nil {
		return "", nil, fmt.Errorf("%s: %w", name, err)
	}
	for _, o := range objs {
		for _, labels := range []map[string]string{o.GetLabels(), podTemplateLabels(o)} {
			for _, l := range KustomizeDropsLabels {
				if _, ok := labels[l]; ok {
					return "", nil, fmt.Errorf("%s: %s %s still has label %s for the kustomize tree", name, o.GetKind(), o.GetName(), l)
				}
			}
		}
	}
	return text, objs, nil
}

func podTemplateLabels(o *unstructured.Unstructured) map[string]string {
	l, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
	return l
}

func render(ch *chart.Chart, vals map[string]any) (*rendered, error) {
	tpls, err := Templates(ch, Options{Values: vals})
	if err != nil {
		return nil, err
	}
	r := &rendered{templates: tpls, objects: map[string]*unstructured.Unstructured{}, source: map[string]string{}}
	for _, name := range slices.Sorted(maps.Keys(tpls)) {
		text, objs, err := forKubectl(name, tpls[name])
		if err != nil {
			return nil, err
		}
		tpls[name] = text
		for _, o := range objs {
			k := key(o)
			if _, dup := r.objects[k]; dup {
				return nil, fmt.Errorf("%s: %s rendered twice", name, k)
			}
			r.objects[k], r.source[k] = o, name
			r.order = append(r.order, k)
		}
	}
	return r, nil
}

// baseOrder is the order of the base's files, which kustomize keeps (neither kubectl apply -k nor
// manifests.Render reorders): the namespace before what it holds, identities and permissions before
// the Deployments that use them, the webhook configurations last. Other templates come after
// these, by name.
var baseOrder = []string{"namespace.yaml", "webhook-rbac.yaml", "controller-rbac.yaml", "self-signed-rbac.yaml",
	"webhook.yaml", "controller.yaml", "networkpolicy.yaml", "webhook-configurations.yaml"}

func applyOrder(a, b string) int {
	rank := func(name string) int {
		if i := slices.Index(baseOrder, name); i >= 0 {
			return i
		}
		return len(baseOrder)
	}
	if c := rank(a) - rank(b); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func key(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	return gvk.Group + "/" + gvk.Kind + "/" + o.GetNamespace() + "/" + o.GetName()
}

func generatedHeader(what string) string {
	return "# Generated by `make manifests` from " + what + ": do not edit; change the chart.\n"
}

func generateKustomize(ch *chart.Chart, out map[string][]byte) error {
	base, err := render(ch, BaseValues())
	if err != nil {
		return err
	}
	names := slices.SortedFunc(maps.Keys(base.templates), applyOrder)
	for _, name := range names {
		out[path.Join(ManifestsDir, "base", name)] = []byte(generatedHeader(path.Join(Dir, "templates", name)+" (default values)") + base.templates[name])
	}
	k, err := kustomization("base", `olmguard's base: the chart rendered with its default values and namespace.create=true. It is
the self-signed install (overlays/self-signed); overlays/cert-manager replaces the certificate.`, false, names, nil)
	if err != nil {
		return err
	}
	out[path.Join(ManifestsDir, "base", "kustomization.yaml")] = k
	for _, v := range variants {
		r, err := render(ch, merge(BaseValues(), v.values))
		if err != nil {
			return fmt.Errorf("%s: %w", v.dir, err)
		}
		added := map[string][]string{} // template -> documents
		var patches []map[string]any
		for _, k := range r.order {
			o := r.objects[k]
			b, inBase := base.objects[k]
			switch {
			case !inBase:
				doc, err := yaml.Marshal(o.Object)
				if err != nil {
					return err
				}
				added[r.source[k]] = append(added[r.source[k]], string(doc))
			case !reflect.DeepEqual(b.Object, o.Object):
				var ops []map[string]any
				diff("", b.Object, o.Object, &ops)
				p, err := yaml.Marshal(ops)
				if err != nil {
					return err
				}
				gvk := o.GroupVersionKind()
				target := map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind, "name": o.GetName()}
				if o.GetNamespace() != "" {
					target["namespace"] = o.GetNamespace()
				}
				patches = append(patches, map[string]any{"target": target, "patch": string(p)})
			}
		}
		for _, k := range base.order {
			if _, ok := r.objects[k]; ok {
				continue
			}
			b := base.objects[k]
			meta := map[string]any{"name": b.GetName()}
			if b.GetNamespace() != "" {
				meta["namespace"] = b.GetNamespace()
			}
			p, err := yaml.Marshal(map[string]any{"apiVersion": b.GetAPIVersion(), "kind": b.GetKind(), "metadata": meta, "$patch": "delete"})
			if err != nil {
				return err
			}
			patches = append(patches, map[string]any{"patch": string(p)})
		}
		var resources []string
		if !v.component {
			resources = append(resources, "../../base")
		}
		for _, name := range slices.Sorted(maps.Keys(added)) {
			resources = append(resources, name)
			what := path.Join(Dir, "templates", name) + " (" + valuesString(v.values) + ")"
			out[path.Join(ManifestsDir, v.dir, name)] = []byte(generatedHeader(what) + strings.Join(added[name], "---\n"))
		}
		k, err := kustomization(v.dir, v.about, v.component, resources, patches)
		if err != nil {
			return err
		}
		out[path.Join(ManifestsDir, v.dir, "kustomization.yaml")] = k
	}
	return nil
}

// valuesString writes values as --set would, e.g. certificate.mode=certManager.
func valuesString(vals map[string]any) string {
	var parts []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if sub, ok := m[k].(map[string]any); ok {
				walk(prefix+k+".", sub)
			} else {
				parts = append(parts, fmt.Sprintf("%s%s=%v", prefix, k, m[k]))
			}
		}
	}
	walk("", vals)
	return strings.Join(parts, ", ")
}

func kustomization(dir, about string, component bool, resources []string, patches []map[string]any) ([]byte, error) {
	k := map[string]any{"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
	if component {
		k = map[string]any{"apiVersion": "kustomize.config.k8s.io/v1alpha1", "kind": "Component"}
	}
	if len(resources) > 0 {
		k["resources"] = resources
	}
	if len(patches) > 0 {
		k["patches"] = patches
	}
	b, err := yaml.Marshal(k)
	if err != nil {
		return nil, err
	}
	var head strings.Builder
	head.WriteString(generatedHeader(Dir + " for manifests/" + dir))
	for _, line := range strings.Split(about, "\n") {
		head.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	return append([]byte(head.String()), b...), nil
}

// diff appends the JSON patch operations that turn a into b: maps key by key, lists of equal
// length element by element, anything else replaced whole.
func diff(p string, a, b any, ops *[]map[string]any) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		keys := slices.Sorted(maps.Keys(am))
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range slices.Compact(keys) {
			av, ina := am[k]
			bv, inb := bm[k]
			kp := p + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
			switch {
			case !inb:
				*ops = append(*ops, map[string]any{"op": "remove", "path": kp})
			case !ina:
				*ops = append(*ops, map[string]any{"op": "add", "path": kp, "value": bv})
			default:
				diff(kp, av, bv, ops)
			}
		}
		return
	}
	al, aok := a.([]any)
	bl, bok := b.([]any)
	if aok && bok && len(al) == len(bl) {
		for i := range al {
			diff(p+"/"+strconv.Itoa(i), al[i], bl[i], ops)
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*ops = append(*ops, map[string]any{"op": "replace", "path": p, "value": b})
	}
}

// kustomizeVariants are the overlay and component combinations CheckSync compares with the chart.
var kustomizeVariants = []struct {
	overlay    string
	components []string
}{
	{"self-signed", nil}, {"cert-manager", nil}, {"self-signed", []string{"servicemonitor"}}, {"cert-manager", []string{"servicemonitor"}},
	{"self-signed", []string{"servicemonitor", "prometheusrule"}}, {"cert-manager", []string{"servicemonitor", "prometheusrule"}},
}

// CheckSync reports every way the checkout at root breaks the one source of truth: a file
// `make manifests` writes (the chart's webhook configurations, the kustomize tree) that differs
// from what it would write now, a file in the kustomize tree it does not write, and an overlay
// (with components) whose kustomize output differs from the chart rendered with the same values,
// compared as parsed objects.
func CheckSync(root string, hooks []registration.Webhook) error {
	var errs []error
	gen, err := Generate(root, hooks)
	if err != nil {
		return err
	}
	for _, p := range slices.Sorted(maps.Keys(gen)) {
		got, err := os.ReadFile(filepath.Join(root, p))
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w (run `make manifests`)", p, err))
		case !bytes.Equal(got, gen[p]):
			errs = append(errs, fmt.Errorf("%s differs from what `make manifests` writes from the chart and the admission table: run it (and change the chart, not the generated file)", p))
		}
	}
	for _, dir := range []string{"base", "overlays", "components"} {
		err := filepath.WalkDir(filepath.Join(root, ManifestsDir, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			if _, ok := gen[filepath.ToSlash(rel)]; !ok {
				errs = append(errs, fmt.Errorf("%s is not generated from the chart: remove it, or add what it holds to the chart", rel))
			}
			return nil
		})
		if err != nil {
			errs = append(errs, err)
		}
	}
	ch, err := LoadDir(filepath.Join(root, Dir))
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, kv := range kustomizeVariants {
		name := strings.Join(append([]string{kv.overlay}, kv.components...), "+")
		vals, err := KustomizeValues(kv.overlay, kv.components...)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rendered, err := Render(ch, Options{Values: vals})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		_, fromChart, err := forKubectl(name, string(rendered))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b, err := manifests.RenderFS(os.DirFS(filepath.Join(root, ManifestsDir)), kv.overlay, "", kv.components...)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		fromKustomize, err := manifests.Decode(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		if d := objectsDiff(fromChart, fromKustomize); d != "" {
			errs = append(errs, fmt.Errorf("kustomize's %s differs from the chart with %s (-chart +kustomize):\n%s", name, valuesString(vals), d))
		}
	}
	return errors.Join(errs...)
}

// objectsDiff compares two sets of objects by kind, namespace and name, whatever their order.
func objectsDiff(a, b []*unstructured.Unstructured) string {
	byKey := func(objs []*unstructured.Unstructured) map[string]map[string]any {
		m := map[string]map[string]any{}
		for _, o := range objs {
			m[key(o)] = o.Object
		}
		return m
	}
	return cmp.Diff(byKey(a), byKey(b))
}
