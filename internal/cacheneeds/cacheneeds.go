// Package cacheneeds is how each of the controller's reconcilers declares, once, what of the
// cluster it reads through the manager's cache: per kind, which objects (label and field
// selectors), which of their labels and annotations, and which fields beyond the metadata. The
// manager merges the declarations of the reconcilers it runs into the cache's options (Merge):
// every kind's objects are cached without managed fields, without the labels and annotations no
// reconciler reads, and trimmed to the fields one reads. Two reconcilers that declare one kind
// differently (other selectors, other field sets) stop the controller at start with an error
// naming both: one informer serves a kind, so a silent choice would starve one of them.
package cacheneeds

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Needs are a reconciler's needs, one entry per kind it reads through the cache.
type Needs []Kind

// Kind is what a reconciler reads of one kind through the cache. A kind it reads both as typed
// objects and as metadata (builder.OnlyMetadata) is declared once: controller-runtime configures
// the cache per kind.
type Kind struct {
	// Object names the kind: a typed object, or a metav1.PartialObjectMetadata with its kind set.
	Object client.Object
	// Label and Field select the objects cached (nil: all).
	Label labels.Selector
	Field fields.Selector
	// Also selects more objects of the kind, cached beside Label's by an informer of its own and
	// read with them as one set (internal/unioncache): a label selector cannot say "Label, or
	// Also". It must select none of the objects Label selects.
	Also labels.Selector
	// Labels and Annotations are the keys the reconciler reads; every other key is dropped before
	// an object enters the cache. A key ending in "/" keeps every key with that prefix.
	Labels, Annotations []string
	// Fields is what the reconciler reads beyond the metadata; the zero value reads metadata only.
	Fields Fields
}

// Fields is a named set of fields beyond the metadata and the function that keeps only them. Two
// declarations of one kind agree when they name the same set, or one of them reads metadata only
// (every set keeps the metadata).
type Fields struct {
	// Name identifies the set in errors and in comparisons (functions cannot be compared).
	Name string
	// Trim keeps only the set's fields of obj (after the labels and annotations were filtered);
	// it may return another object of the same type.
	Trim func(obj client.Object) client.Object
}

// Declared is one reconciler's declaration.
type Declared struct {
	Reconciler string
	Needs      Needs
}

// Merged is what the manager's cache is built from: per kind, its options, and for the kinds
// declared with Also, the options of the second selection.
type Merged struct {
	ByObject map[client.Object]cache.ByObject
	Also     map[client.Object]cache.ByObject
}

// merged is one kind's merged declaration and who made each part of it.
type merged struct {
	obj                     client.Object
	label, field, also      string
	labelSel, alsoSel       labels.Selector
	fieldSel                fields.Selector
	selectorBy              string
	fields                  Fields
	fieldsBy                string
	labelKeys, annotationKs map[string]bool
}

// Merge merges the declarations into the cache's per-kind options. It fails, naming both
// reconcilers, when two declare one kind with other selectors or other field sets.
func Merge(scheme *runtime.Scheme, decls []Declared) (Merged, error) {
	byGVK := map[schema.GroupVersionKind]*merged{}
	var order []schema.GroupVersionKind
	for _, d := range decls {
		for _, k := range d.Needs {
			gvk, err := apiutil.GVKForObject(k.Object, scheme)
			if err != nil {
				return Merged{}, fmt.Errorf("cache needs of reconciler %q: %w", d.Reconciler, err)
			}
			label, field, also := selectorString(k.Label), selectorString(k.Field), selectorString(k.Also)
			m, ok := byGVK[gvk]
			if !ok {
				m = &merged{obj: k.Object, label: label, field: field, also: also, labelSel: k.Label, fieldSel: k.Field, alsoSel: k.Also,
					selectorBy: d.Reconciler, fields: k.Fields, fieldsBy: d.Reconciler, labelKeys: map[string]bool{}, annotationKs: map[string]bool{}}
				byGVK[gvk] = m
				order = append(order, gvk)
			} else {
				if label != m.label || field != m.field || also != m.also {
					return Merged{}, fmt.Errorf("conflicting cache needs for %s: reconciler %q selects %s, reconciler %q selects %s; one informer serves a kind, so both must select the same objects",
						gvk.Kind, m.selectorBy, describeSelectors(m.label, m.field, m.also), d.Reconciler, describeSelectors(label, field, also))
				}
				switch {
				case k.Fields.Name == "" || k.Fields.Name == m.fields.Name:
				case m.fields.Name == "":
					m.fields, m.fieldsBy = k.Fields, d.Reconciler
				default:
					return Merged{}, fmt.Errorf("conflicting cache needs for %s: reconciler %q reads the fields %q, reconciler %q the fields %q; declare one field set both read",
						gvk.Kind, m.fieldsBy, m.fields.Name, d.Reconciler, k.Fields.Name)
				}
			}
			for _, l := range k.Labels {
				m.labelKeys[l] = true
			}
			for _, a := range k.Annotations {
				m.annotationKs[a] = true
			}
		}
	}
	out := Merged{ByObject: make(map[client.Object]cache.ByObject, len(byGVK)), Also: map[client.Object]cache.ByObject{}}
	for _, gvk := range order {
		m := byGVK[gvk]
		trim := m.fields.Trim
		if m.fields.Name == "" {
			trim = MetadataOnly
		}
		transform := Transform(keys(m.labelKeys), keys(m.annotationKs), trim)
		out.ByObject[m.obj] = cache.ByObject{Label: m.labelSel, Field: m.fieldSel, Transform: transform}
		if m.also != "" {
			out.Also[m.obj] = cache.ByObject{Label: m.alsoSel, Field: m.fieldSel, Transform: transform}
		}
	}
	return out, nil
}

// Transform drops managed fields, every label and annotation but the keys given, and then
// applies trim (when not nil). Objects that are not client.Objects (a tombstone) pass unchanged.
func Transform(labelKeys, annotationKeys []string, trim func(client.Object) client.Object) func(any) (any, error) {
	return func(in any) (any, error) {
		obj, ok := in.(client.Object)
		if !ok {
			return in, nil
		}
		obj.SetManagedFields(nil)
		obj.SetLabels(Keep(obj.GetLabels(), labelKeys))
		obj.SetAnnotations(Keep(obj.GetAnnotations(), annotationKeys))
		shareStrings(obj)
		if trim != nil {
			obj = trim(obj)
		}
		obj.SetLabels(ShareMap(obj.GetLabels()))
		obj.SetAnnotations(ShareMap(obj.GetAnnotations()))
		return obj, nil
	}
}

// shareStrings makes the strings that repeat across a kind's objects one copy each (the namespace,
// and each ownerReference's apiVersion and kind), and an object's ownerReferences one copy for
// every object with the same ones (ShareOwnerReferences). The decoder allocates every string
// anew: on a cluster of 2,000 namespaces, where OLM owns each InstallPlan by every Subscription
// of its namespace, 20,000 plans carry 200,000 references (docs/performance.md, "A cluster of
// 2,000 namespaces").
func shareStrings(obj client.Object) {
	obj.SetNamespace(Intern(obj.GetNamespace()))
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return
	}
	// The transform runs on each listed page and again as the informer stores the object: the
	// second time the references are shared already, and the table returns them unchanged.
	obj.SetOwnerReferences(ShareOwnerReferences(refs))
}

// Intern returns the one shared copy of s (package unique: a copy no object uses any more is
// freed).
func Intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// TypedView is the field set of olmguard's typed views of OLM's kinds (pkg/olm/v1alpha1,
// pkg/olm/v1), which carry only the fields olmguard reads: decoding drops the rest.
var TypedView = Fields{Name: "olmguard's typed view"}

// MetadataOnly keeps an object's type and metadata, nothing of its spec or status: a new object of
// the same type holding them.
func MetadataOnly(obj client.Object) client.Object {
	if _, ok := obj.(*metav1.PartialObjectMetadata); ok {
		return obj
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return obj
	}
	out := reflect.New(v.Elem().Type())
	for _, f := range []string{"TypeMeta", "ObjectMeta"} {
		if src := v.Elem().FieldByName(f); src.IsValid() {
			out.Elem().FieldByName(f).Set(src)
		}
	}
	if o, ok := out.Interface().(client.Object); ok {
		return o
	}
	return obj
}

// Keep returns the entries of m whose key is one of keys, or starts with one of them that ends in
// "/"; nil when none is left, and m itself when every entry is kept (the transform runs twice on
// each listed object: the second time allocates nothing).
func Keep(m map[string]string, keys []string) map[string]string {
	kept := 0
	for k := range m {
		if wanted(k, keys) {
			kept++
		}
	}
	switch kept {
	case 0:
		return nil
	case len(m):
		return m
	}
	out := make(map[string]string, kept)
	for k, v := range m {
		if wanted(k, keys) {
			out[k] = v
		}
	}
	return out
}

func wanted(k string, keys []string) bool {
	for _, want := range keys {
		if k == want || (strings.HasSuffix(want, "/") && strings.HasPrefix(k, want)) {
			return true
		}
	}
	return false
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

type stringer interface{ String() string }

// selectorString is "" for no selector or one that selects everything.
func selectorString[S stringer](s S) string {
	if any(s) == nil {
		return ""
	}
	if v, ok := any(s).(interface{ Empty() bool }); ok && v.Empty() {
		return ""
	}
	return s.String()
}

func describeSelectors(label, field, also string) string {
	var parts []string
	if label != "" {
		parts = append(parts, "labels "+strconvQuote(label))
	}
	if also != "" {
		parts = append(parts, "also labels "+strconvQuote(also))
	}
	if field != "" {
		parts = append(parts, "fields "+strconvQuote(field))
	}
	if len(parts) == 0 {
		return "every object"
	}
	return strings.Join(parts, " and ")
}

func strconvQuote(s string) string { return fmt.Sprintf("%q", s) }
