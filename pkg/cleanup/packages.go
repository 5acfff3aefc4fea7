package cleanup

import (
	"encoding/json"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// PropertiesAnnotation is where OLM's catalog-operator writes a bundle's properties (olm.package
// among them) on the CSV it creates from an InstallPlan step (resolver NewStepResourceFromBundle;
// the resolver reads it back in source_csvs.go and infers it from the Subscription when missing).
const PropertiesAnnotation = "operatorframework.io/properties"

// maxPropertiesAnnotation bounds the annotation olmguard parses; a bundle's properties are a few KB.
const maxPropertiesAnnotation = 64 << 10

// CSVRef is what the shared-object rule knows of a CSV: who it is and which package it belongs to.
type CSVRef struct {
	Namespace, Name string
	// Packages are every package the CSV may belong to (PackagesOf).
	Packages []string
	// Copied CSVs are OLM's copies in target namespaces: the original they copy is counted itself.
	// Only OLM's own mark counts here (status.reason Copied, which OLM's aggregated edit and admin
	// roles cannot write): a tenant may label its CSV olm.copiedFrom, and a CSV wrongly taken for
	// a copy would stop keeping the objects it uses (CopiedByOLM).
	Copied bool
	// Deleting CSVs run this same rule in their own cleanup.
	Deleting bool
}

// PackagesOf lists every package a CSV may belong to, from all the evidence at hand:
//   - OLM's own: the olm.package property of the operatorframework.io/properties annotation;
//   - the Subscription of its namespace whose status names it (spec.name is the package), as
//     OLM's resolver infers a CSV's package when the annotation is missing;
//   - the name rule: what precedes ".v<digit>" in the <package>.v<version> names bundle tools
//     write (csvPackage).
//
// The list is a union on purpose. Each source is one a tenant may write (a CSV it created, the
// annotation of its own CSV), and the rule using it only ever keeps an object when two CSVs share
// a package: more evidence can keep more objects, never delete one that the name rule keeps.
func PackagesOf(name string, annotations map[string]string, subs []v1alpha1.Subscription) []string {
	var out []string
	add := func(p string) {
		for _, q := range out {
			if q == p {
				return
			}
		}
		if p != "" {
			out = append(out, p)
		}
	}
	add(propertiesPackage(annotations[PropertiesAnnotation]))
	for i := range subs {
		s := &subs[i]
		if s.Status.InstalledCSV == name || s.Status.CurrentCSV == name {
			add(s.Spec.Package)
		}
	}
	if p, ok := csvPackage(name); ok {
		add(p)
	}
	return out
}

// propertiesPackage is the packageName of the olm.package property in OLM's properties
// annotation, "" when there is none or the annotation does not parse.
func propertiesPackage(raw string) string {
	if raw == "" || len(raw) > maxPropertiesAnnotation {
		return ""
	}
	var anno struct {
		Properties []struct {
			Type  string          `json:"type"`
			Value json.RawMessage `json:"value"`
		} `json:"properties"`
	}
	if json.Unmarshal([]byte(raw), &anno) != nil {
		return ""
	}
	for _, p := range anno.Properties {
		if p.Type != "olm.package" {
			continue
		}
		var v struct {
			PackageName string `json:"packageName"`
		}
		if json.Unmarshal(p.Value, &v) == nil && v.PackageName != "" {
			return v.PackageName
		}
	}
	return ""
}

// CSVRefOf builds the rule's view of a CSV from its metadata and the Subscriptions of its namespace.
func CSVRefOf(namespace, name string, labels, annotations map[string]string, reason string, deleting bool, subs []v1alpha1.Subscription) CSVRef {
	return CSVRef{Namespace: namespace, Name: name, Packages: PackagesOf(name, annotations, subs),
		Copied: CopiedByOLM(reason), Deleting: deleting}
}

// CopiedByOLM reports whether a CSV is OLM's copy by the one mark a tenant cannot write: its
// status.reason (the olm.copiedFrom label and the operator-namespace annotation are metadata the
// CSV's writer controls). A copy before OLM's first status write is counted as a CSV of its own,
// which only keeps more.
func CopiedByOLM(reason string) bool { return reason == olm.CopiedReason }

// Users indexes the CSVs that may still use a cluster object shared by the versions and
// namespaces of one package. Build it once per cleanup or sweep with NewUsers.
type Users struct {
	byName    map[string][]nsName
	byPackage map[string][]nsName
}

type nsName struct{ ns, name string }

// NewUsers indexes csvs. Copied CSVs do not count: each copies an original in its operator
// namespace that counts itself (and a copy whose original is gone is garbage OLM removes). CSVs
// being deleted do not count: each runs this same rule in its own cleanup, so the last one to go
// deletes the object; counting them would let two CSVs uninstalled together each keep the object
// for the other, for good. An upgrade never leaves a package without a live CSV: OLM deletes the
// replaced CSV only once its successor has succeeded (olm-facts §3.4).
func NewUsers(csvs []CSVRef) Users {
	u := Users{byName: map[string][]nsName{}, byPackage: map[string][]nsName{}}
	for _, c := range csvs {
		if c.Copied || c.Deleting {
			continue
		}
		id := nsName{c.Namespace, c.Name}
		u.byName[c.Name] = append(u.byName[c.Name], id)
		for _, p := range c.Packages {
			u.byPackage[p] = append(u.byPackage[p], id)
		}
	}
	return u
}

// namePrefixes are the beginnings of a CSV name up to each '.', '-' or '_': the packages it may
// belong to when nothing but its name is left (the orphan sweep knows an object's olm.owner only,
// not the package of a CSV that is gone). They include the name rule's package (the part before
// ".v<digit>") and, conservatively, more: a package "pkg" owns "pkg-2.0.0" too.
func namePrefixes(name string) []string {
	var out []string
	for i := 1; i < len(name); i++ {
		switch name[i] {
		case '.', '-', '_':
			out = append(out, name[:i])
		}
	}
	return out
}

// StillUsed is the one rule for a cluster object that the versions and namespaces of a package
// share (a bundled ClusterRole or binding labelled olm.owner only, the auth-delegator
// ClusterRoleBinding, an APIService, the kube-system auth-reader RoleBinding): it is still used
// while a CSV other than self, in any namespace, has the name owner (the object's olm.owner) or
// self's name, or has a package that is one of self's (PackagesOf) or begins owner up to a '.',
// '-' or '_' (namePrefixes). self is the CSV being cleaned up, nil for the orphan sweep. OLM
// relabels such an object olm.owner=<newest CSV> when another namespace installs another version
// (OLM issue #2985): the label says who applied it last, not who uses it. Every source of a
// package only ever adds users, so a wrong or hostile one can keep an object, never delete one.
func (u Users) StillUsed(owner string, self *CSVRef) bool {
	isSelf := func(id nsName) bool { return self != nil && id.ns == self.Namespace && id.name == self.Name }
	others := func(ids []nsName) bool {
		for _, id := range ids {
			if !isSelf(id) {
				return true
			}
		}
		return false
	}
	if owner != "" && others(u.byName[owner]) {
		return true
	}
	for _, p := range namePrefixes(owner) {
		if others(u.byPackage[p]) {
			return true
		}
	}
	if self != nil {
		if self.Name != "" && others(u.byName[self.Name]) {
			return true
		}
		for _, p := range self.Packages {
			if others(u.byPackage[p]) {
				return true
			}
		}
	}
	return false
}
