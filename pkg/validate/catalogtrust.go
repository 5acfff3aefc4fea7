package validate

import (
	"flag"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/olmguard/olmguard/internal/flags"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// The checks of catalog trust (--policy-catalog-trust), as olmguard_webhook_policy_violations_total names them.
const (
	// UntrustedCatalogPolicy: a CatalogSource written outside the trusted namespaces that is not
	// served from a trusted registry alone.
	UntrustedCatalogPolicy = "untrusted-catalog"
	// UntrustedCatalogSubscriptionPolicy: a Subscription naming such a CatalogSource, or one
	// outside the trusted namespaces that does not exist.
	UntrustedCatalogSubscriptionPolicy = "untrusted-catalog-subscription"
)

// DefaultGlobalCatalogNamespace is upstream OLM's global catalog namespace (its catalog-operator's
// --namespace, "olm" in OLM's own manifests; OpenShift's is openshift-marketplace).
const DefaultGlobalCatalogNamespace = "olm"

// TrustedCatalogs is the allowlist of who may serve operators (OLM #3820): OLM installs whatever
// a CatalogSource serves, clusterPermissions included, so whoever writes a CatalogSource decides
// which ClusterRoles OLM grants.
type TrustedCatalogs struct {
	// GlobalNamespace is OLM's global catalog namespace, always trusted: its catalogs serve every
	// namespace, and only cluster administrators write there.
	GlobalNamespace string
	// Namespaces are further namespaces whose CatalogSources are trusted, whatever they serve.
	Namespaces []string
	// Registries are image prefixes (registry host, optionally a path): a gRPC CatalogSource
	// served only from an image under one of them is trusted in any namespace.
	Registries []string
}

// DefaultTrustedCatalogs are the flag defaults: only the global catalog namespace.
func DefaultTrustedCatalogs() TrustedCatalogs {
	return TrustedCatalogs{GlobalNamespace: DefaultGlobalCatalogNamespace}
}

// BindFlags registers --global-catalog-namespace, --trusted-catalog-namespaces and
// --trusted-catalog-registries.
func (t *TrustedCatalogs) BindFlags(fs *flag.FlagSet) {
	fs.Var(&nameFlag{&t.GlobalNamespace}, "global-catalog-namespace", "OLM's global catalog namespace (its catalog-operator's --namespace; openshift-marketplace on OpenShift): its CatalogSources are always trusted by --policy-catalog-trust")
	fs.Var(flags.List{Items: &t.Namespaces, Check: checkNamespaceName}, "trusted-catalog-namespaces", "comma-separated namespaces whose CatalogSources --policy-catalog-trust trusts besides the global catalog namespace")
	fs.Var(flags.List{Items: &t.Registries, Check: checkRegistry}, "trusted-catalog-registries", "comma-separated image prefixes (a registry host, optionally with a path, e.g. registry.example.com/catalogs) from which a gRPC CatalogSource with spec.image and no spec.address is trusted in any namespace; matched on a path boundary")
}

// NamespaceTrusted reports whether CatalogSources in ns are trusted whatever they serve.
func (t TrustedCatalogs) NamespaceTrusted(ns string) bool {
	return ns != "" && (ns == t.GlobalNamespace || slices.Contains(t.Namespaces, ns))
}

// ImageTrusted reports whether image lies under one of the trusted registries: its repository
// (the reference without tag or digest) equals a prefix or continues it after a "/". So
// registry.example.com trusts registry.example.com/x/catalog:v1 but neither
// registry.example.com.evil.io/x nor registry.example.com:5000/x, and registry.example.com/team
// does not trust registry.example.com/teamx/catalog. The image must name its registry host: a
// reference without one (busybox, org/catalog) is pulled from Docker Hub, whatever its first
// component reads like.
func (t TrustedCatalogs) ImageTrusted(image string) bool {
	repo := repository(image)
	if host, _, ok := strings.Cut(repo, "/"); !ok || !registryHost(host) {
		return false
	}
	return slices.ContainsFunc(t.Registries, func(prefix string) bool {
		prefix = strings.TrimSuffix(prefix, "/")
		return prefix != "" && (repo == prefix || strings.HasPrefix(repo, prefix+"/"))
	})
}

// registryHost reports whether the first component of an image reference is a registry host, as
// container runtimes decide it: it holds a "." or a ":" (a port), or is localhost.
func registryHost(host string) bool {
	return host == "localhost" || strings.ContainsAny(host, ".:")
}

// repository strips an image reference's digest and tag. Only the name after the last "/" can
// carry a tag; a ":" before it is a registry port.
func repository(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, ':'); i > strings.LastIndexByte(image, '/') {
		image = image[:i]
	}
	return image
}

// Catalog is what catalog trust reads of a CatalogSource.
type Catalog struct {
	Namespace, Name string
	SourceType      v1alpha1.SourceType
	Image, Address  string
}

// CatalogOf is the Catalog view of cs.
func CatalogOf(cs *v1alpha1.CatalogSource) Catalog {
	return Catalog{Namespace: cs.Namespace, Name: cs.Name, SourceType: cs.Spec.SourceType, Image: cs.Spec.Image, Address: cs.Spec.Address}
}

// untrusted returns why c is not trusted, or "" when it is. A catalog in a trusted namespace is
// trusted whatever it serves. Elsewhere only a gRPC catalog served from a trusted image alone is:
// with spec.address set, OLM connects to that address even when spec.image is set too
// (olm-facts.md §5.1), so whoever runs the address serves the bundles; a configmap or internal
// catalog serves what its namespace's ConfigMap holds.
func (t TrustedCatalogs) untrusted(c Catalog) string {
	if t.NamespaceTrusted(c.Namespace) {
		return ""
	}
	where := fmt.Sprintf("namespace %s is not a trusted catalog namespace (%s)", c.Namespace, t.describe())
	switch {
	case c.SourceType != v1alpha1.SourceTypeGrpc:
		return fmt.Sprintf("%s and a %q catalog serves whatever its namespace holds", where, c.SourceType)
	case c.Address != "":
		return fmt.Sprintf("%s and spec.address %s is served by whoever runs it", where, c.Address)
	case c.Image == "":
		return where
	case len(t.Registries) == 0:
		return fmt.Sprintf("%s and no registry is trusted", where)
	case !t.ImageTrusted(c.Image):
		return fmt.Sprintf("%s and image %s is not under a trusted registry (%s)", where, c.Image, strings.Join(t.Registries, ", "))
	}
	return ""
}

// describe names the trusted namespaces for a message.
func (t TrustedCatalogs) describe() string {
	names := append([]string{t.GlobalNamespace}, t.Namespaces...)
	return "trusted: " + strings.Join(names, ", ")
}

// CatalogSourcePolicies checks a CatalogSource being created, or updated in what it serves
// (sourceType, image, address, configMap): OLM installs whatever it serves, and grants the
// clusterPermissions of its CSVs as ClusterRoles (OLM #3820), so only the trusted may serve.
func CatalogSourcePolicies(p Policies, t TrustedCatalogs, c Catalog) []Violation {
	if !p.CatalogTrust.active() {
		return nil
	}
	why := t.untrusted(c)
	if why == "" {
		return nil
	}
	return []Violation{{Policy: UntrustedCatalogPolicy, Mode: p.CatalogTrust, Message: fmt.Sprintf(
		"CatalogSource %s/%s is not trusted to serve operators: %s; OLM grants the cluster-wide permissions of whatever a catalog serves (OLM #3820): serve it from an image under --trusted-catalog-registries or in a namespace of --trusted-catalog-namespaces (--policy-catalog-trust)",
		c.Namespace, c.Name, why)}}
}

// SubscriptionCatalogPolicies checks the catalog a Subscription being created, or repointed,
// names: catalog is the CatalogSource at spec.sourceNamespace/spec.source, nil when it does not
// exist (then only a trusted namespace makes it trusted: what is created there later is checked
// when it is). This catches what the CatalogSource check could not: catalogs written before the
// policy was enforced, or while the webhook was away.
func SubscriptionCatalogPolicies(p Policies, t TrustedCatalogs, sub *v1alpha1.Subscription, catalog *Catalog) []Violation {
	if !p.CatalogTrust.active() {
		return nil
	}
	ns, name := SourceNamespace(sub), sub.Spec.CatalogSource
	var why string
	switch {
	case t.NamespaceTrusted(ns):
		return nil
	case catalog == nil:
		why = fmt.Sprintf("it does not exist and namespace %s is not a trusted catalog namespace (%s)", ns, t.describe())
	default:
		if why = t.untrusted(*catalog); why == "" {
			return nil
		}
	}
	return []Violation{{Policy: UntrustedCatalogSubscriptionPolicy, Mode: p.CatalogTrust, Message: fmt.Sprintf(
		"Subscription %s/%s installs from CatalogSource %s/%s, which is not trusted to serve operators: %s; OLM grants the cluster-wide permissions of whatever a catalog serves (OLM #3820): subscribe from a catalog in a namespace of --trusted-catalog-namespaces or served from an image under --trusted-catalog-registries (--policy-catalog-trust)",
		sub.Namespace, sub.Name, ns, name, why)}}
}

// SourceNamespace is the namespace of the catalog a Subscription names: spec.sourceNamespace, or
// the Subscription's own namespace when it is empty (the catalog a tenant could write).
func SourceNamespace(sub *v1alpha1.Subscription) string {
	if sub.Spec.CatalogSourceNamespace != "" {
		return sub.Spec.CatalogSourceNamespace
	}
	return sub.Namespace
}

// nameFlag is a namespace name flag.
type nameFlag struct{ name *string }

func (n *nameFlag) String() string {
	if n == nil || n.name == nil {
		return ""
	}
	return *n.name
}

func (n *nameFlag) Set(v string) error {
	if err := checkNamespaceName(v); err != nil {
		return err
	}
	*n.name = v
	return nil
}

func checkNamespaceName(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}

// checkRegistry accepts a registry host (with an optional port) and an optional path: no scheme,
// tag, digest or wildcard, which would not match on a boundary as written.
func checkRegistry(r string) error {
	host, _, _ := strings.Cut(strings.TrimSuffix(r, "/"), "/")
	switch {
	case strings.Contains(r, "://"):
		return fmt.Errorf("registry %q: give it without a scheme, e.g. registry.example.com/catalogs", r)
	case strings.ContainsAny(r, "@*? \t"):
		return fmt.Errorf("registry %q: a prefix without digest, wildcard or space is expected", r)
	case strings.Contains(strings.TrimPrefix(r, host), ":"):
		return fmt.Errorf("registry %q: a prefix without a tag is expected", r)
	case host == "" || strings.HasPrefix(host, ".") || strings.HasPrefix(host, ":") || !registryHost(host):
		return fmt.Errorf("registry %q: a registry host (with a dot or a port, or localhost) is expected first, e.g. docker.io/org rather than org", r)
	}
	return nil
}
