package admit

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm"
	v1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// DefaultLookupTimeout bounds a handler's live lookup, inside the webhook's 3 s budget, so a slow
// apiserver gets a warned, unchanged admission rather than the apiserver's own timeout.
const DefaultLookupTimeout = 2 * time.Second

// Subscriptions reads a namespace's Subscriptions for a handler.
type Subscriptions interface {
	// List returns the namespace's Subscriptions. With metadataOnly only their metadata is filled
	// in (name, UID, deletionTimestamp), which is all an InstallPlan CREATE or an ownerReference
	// check needs.
	List(ctx context.Context, namespace string, metadataOnly bool) ([]v1alpha1.Subscription, error)
}

// LiveSubscriptions lists Subscriptions from the apiserver on every call: a handler must see a
// Subscription created the moment before the object it judges (the OLM issue #3199 window), which
// no cache of its own can promise. It is the one Subscription read of every handler.
//
// F1's guarantee rests on the read being linearizable (docs/f1-guarantee.md). The Subscription
// #3199 leaves out of a plan was committed before OLM's resolver listed Subscriptions, so before
// the plan's CREATE was sent (olm-facts.md §1.5). A consistent List (no resourceVersion, the
// default) returns every object committed before it began, on whichever apiserver serves it. A
// watch-cache read (WatchCache, resourceVersion "0") answers from what the serving apiserver has
// received so far, which can trail a write made a moment before (test/ha shows it); such reads
// are counted as such, and the controller repairs a plan one missed once OLM points the
// Subscription at it.
type LiveSubscriptions struct {
	Reader client.Reader
	// WatchCache reads the serving apiserver's watch cache instead of a consistent List: cheaper
	// under bursts, but a Subscription committed a moment before can be missed.
	WatchCache bool
	// Webhook labels olmguard_webhook_subscription_reads_total.
	Webhook string
	// Timeout bounds one List (DefaultLookupTimeout when zero).
	Timeout time.Duration
}

// Read names of olmguard_webhook_subscription_reads_total.
const (
	ReadConsistent = "consistent"
	ReadWatchCache = "watch-cache"
)

// List lists the namespace's Subscriptions live. With metadataOnly it lists metadata, which the
// apiserver sends as protobuf and without the status (every catalog's health, the conditions).
func (l LiveSubscriptions) List(ctx context.Context, namespace string, metadataOnly bool) ([]v1alpha1.Subscription, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	opts := []client.ListOption{client.InNamespace(namespace)}
	read := ReadConsistent
	if l.WatchCache {
		opts, read = append(opts, fromWatchCache()), ReadWatchCache
	}
	subs, err := l.list(ctx, metadataOnly, opts)
	if err == nil {
		metrics.SubscriptionReads.WithLabelValues(l.Webhook, read).Inc()
	}
	return subs, err
}

func (l LiveSubscriptions) list(ctx context.Context, metadataOnly bool, opts []client.ListOption) ([]v1alpha1.Subscription, error) {
	if !metadataOnly {
		list := &v1alpha1.SubscriptionList{}
		if err := l.Reader.List(ctx, list, opts...); err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.SubscriptionKind + "List"))
	if err := l.Reader.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	out := make([]v1alpha1.Subscription, len(list.Items))
	for i := range list.Items {
		out[i].ObjectMeta = list.Items[i].ObjectMeta
	}
	return out, nil
}

// CatalogNamespaces answers whether a namespace holds at least one CatalogSource.
type CatalogNamespaces interface {
	HasCatalogSource(ctx context.Context, namespace string) (bool, error)
}

// LiveCatalogNamespaces lists CatalogSources' metadata from the apiserver's watch cache: a
// catalog exists long before its first unpack Job, so the read may skip the consistent-read wait.
type LiveCatalogNamespaces struct {
	Reader client.Reader
	// Timeout bounds one List (DefaultLookupTimeout when zero).
	Timeout time.Duration
}

// HasCatalogSource lists the namespace's CatalogSources.
func (l LiveCatalogNamespaces) HasCatalogSource(ctx context.Context, namespace string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.CatalogSourceKind + "List"))
	if err := l.Reader.List(ctx, list, client.InNamespace(namespace), fromWatchCache()); err != nil {
		return false, err
	}
	return len(list.Items) > 0, nil
}

// fromWatchCache makes a List read the apiserver's watch cache (resourceVersion "0") instead of
// waiting for a consistent read. A new value each time: the client fills in the Raw options.
func fromWatchCache() client.ListOption {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultLookupTimeout
	}
	return d
}

// OperatorGroups reads a namespace's OperatorGroups for a handler.
type OperatorGroups interface {
	// List returns the metadata of the namespace's OperatorGroups (name, deletionTimestamp).
	List(ctx context.Context, namespace string) ([]metav1.ObjectMeta, error)
}

// LiveOperatorGroups lists OperatorGroups' metadata from the apiserver with a consistent read:
// `kubectl apply -f` of a file holding an OperatorGroup and a Subscription (or two
// OperatorGroups) creates them a moment apart, and a watch-cache read could miss the first one.
type LiveOperatorGroups struct {
	Reader client.Reader
	// Timeout bounds one List (DefaultLookupTimeout when zero).
	Timeout time.Duration
}

// List lists the namespace's OperatorGroups' metadata.
func (l LiveOperatorGroups) List(ctx context.Context, namespace string) ([]metav1.ObjectMeta, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(v1.GroupVersion.WithKind(olm.OperatorGroupKind + "List"))
	if err := l.Reader.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := make([]metav1.ObjectMeta, len(list.Items))
	for i := range list.Items {
		out[i] = list.Items[i].ObjectMeta
	}
	return out, nil
}

// Namespaces answers which of some namespaces do not exist.
type Namespaces interface {
	Missing(ctx context.Context, names []string) ([]string, error)
}

// LiveNamespaces reads Namespaces' metadata from the apiserver, one GET per name (an
// OperatorGroup names a few; listing every namespace of a large cluster would cost more).
type LiveNamespaces struct {
	Reader client.Reader
	// Timeout bounds all the GETs of one call together (DefaultLookupTimeout when zero).
	Timeout time.Duration
}

// Missing returns the names, in their order, that no Namespace has.
func (l LiveNamespaces) Missing(ctx context.Context, names []string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	var missing []string
	for _, name := range names {
		ns := &metav1.PartialObjectMetadata{}
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		err := l.Reader.Get(ctx, client.ObjectKey{Name: name}, ns)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, name)
		case err != nil:
			return nil, err
		}
	}
	return missing, nil
}

// CatalogSources reads one CatalogSource for a handler.
type CatalogSources interface {
	// Get returns the CatalogSource, or nil when it does not exist.
	Get(ctx context.Context, namespace, name string) (*v1alpha1.CatalogSource, error)
}

// LiveCatalogSources reads a CatalogSource from the apiserver with a consistent GET: `kubectl
// apply -f` of a file holding a CatalogSource and a Subscription to it creates them a moment
// apart.
type LiveCatalogSources struct {
	Reader client.Reader
	// Timeout bounds one GET (DefaultLookupTimeout when zero).
	Timeout time.Duration
}

// Get reads the CatalogSource namespace/name.
func (l LiveCatalogSources) Get(ctx context.Context, namespace, name string) (*v1alpha1.CatalogSource, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	cs := &v1alpha1.CatalogSource{}
	err := l.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cs)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return cs, nil
}
