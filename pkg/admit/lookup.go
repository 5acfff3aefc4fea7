package admit

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
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
	// List returns a trimmed view of the namespace's Subscriptions: name, namespace, UID,
	// deletionTimestamp and, unless metadataOnly, spec.name, spec.installPlanApproval and the
	// status fields the policies read (installPlanRef, installPlanGeneration, currentCSV,
	// installedCSV). With metadataOnly only the metadata is read, which is all an InstallPlan
	// CREATE or an ownerReference check needs. An error wrapping ErrCapped means the namespace
	// holds more than one lookup considers.
	List(ctx context.Context, namespace string, metadataOnly bool) ([]v1alpha1.Subscription, error)
	// Live returns the UIDs of the named Subscriptions that exist and are not being deleted,
	// reading those names only: an ownerReference check costs what the object names, not what
	// the namespace holds. More names than a lookup reads one by one wrap ErrCapped.
	Live(ctx context.Context, namespace string, names []string) (map[string]types.UID, error)
}

// Bounds of one Subscription lookup. A tenant who may create Subscriptions decides their size (a
// spec.config of a megabyte) and their number, so a lookup reads them in pages, keeps only the
// fields the decisions need, drops each page before it reads the next, and stops at a cap: the
// memory of one lookup is one page plus the trimmed views, whatever the namespace holds.
const (
	// DefaultSubscriptionPageSize is how many Subscriptions one List request returns. A page is
	// read whole before it is decoded: ten objects of the apiserver's largest (1.5 MiB in etcd)
	// are 15 MiB. Measured with 200 Subscriptions of 1 MiB (docs/performance.md).
	DefaultSubscriptionPageSize = 10
	// DefaultMetadataPageSize is how many Subscriptions one List of metadata only returns (F1's
	// read and the cache's check). A page costs a round trip, and each was 10 ms on the scale
	// benchmark's cluster: 200 Subscriptions in pages of 10 held an InstallPlan CREATE for 200 ms
	// (docs/performance.md). An object's metadata is at most about 300 KB (the apiserver's
	// 256 KiB bound on annotations, labels, managed fields), so a page of 50 stays within the
	// 15 MiB of a page of whole Subscriptions.
	DefaultMetadataPageSize = 50
	// DefaultMaxSubscriptions is the most Subscriptions one lookup considers.
	DefaultMaxSubscriptions = 1000
	// DefaultMaxViewBytes bounds the bytes of the strings one lookup keeps (names, packages,
	// CSV names): a Subscription's spec.name has no length limit.
	DefaultMaxViewBytes = 4 << 20
)

// ErrCapped is wrapped by the error of a lookup that stopped at its bound: the request is
// admitted unchanged, with a warning, counted in olmguard_webhook_reads_capped_total.
var ErrCapped = errors.New("too many to consider")

// pageSlots bounds how many pages of whole Subscriptions the process reads at once: a page is the
// one large allocation of a lookup, and the apiserver may call the webhook for many requests at
// the same time. A lookup waiting for a slot waits within its own timeout.
var pageSlots = make(chan struct{}, 2)

// LiveSubscriptions lists Subscriptions from the apiserver on every call: a handler must see a
// Subscription created the moment before the object it judges (the OLM issue #3199 window), which
// no cache of its own can promise. It is the one Subscription read of every handler. A cache
// (Cache) may supply the spec and status of the Subscriptions the live list names, never which
// ones exist.
//
// F1's guarantee rests on the read being linearizable (docs/f1-guarantee.md). The Subscription
// #3199 leaves out of a plan was committed before OLM's resolver listed Subscriptions, so before
// the plan's CREATE was sent (olm-facts.md §1.5). A consistent List (no resourceVersion, the
// default) returns every object committed before it began, on whichever apiserver serves it; read
// in pages, every later page is read at the first page's resourceVersion (the continue token
// carries it), so the pages together are that one consistent snapshot. A watch-cache read
// answers from what the serving apiserver has received so far, which can trail a write made a
// moment before (test/ha shows it); such reads are counted as such, and the controller repairs a
// plan one missed once OLM points the Subscription at it.
type LiveSubscriptions struct {
	Reader client.Reader
	// WatchCache reads the serving apiserver's watch cache instead of a consistent List: cheaper
	// under bursts, but a Subscription committed a moment before can be missed.
	WatchCache bool
	// Webhook labels olmguard_webhook_subscription_reads_total.
	Webhook string
	// Timeout bounds one lookup, every page (DefaultLookupTimeout when zero).
	Timeout time.Duration
	// PageSize, MetadataPageSize, MaxItems and MaxViewBytes bound the lookup (the defaults
	// above when zero).
	PageSize         int64
	MetadataPageSize int64
	MaxItems         int
	MaxViewBytes     int
	// Cache, when set, holds the trimmed views of Subscriptions (TrimSubscription, NewInformer).
	// A lookup that needs spec and status then lists the namespace's metadata (the consistent
	// snapshot, as above) and takes from the cache each Subscription whose UID and
	// resourceVersion match the list's; it GETs each other one (a consistent read, one whole
	// object at a time) and trims it. Without Cache it lists whole Subscriptions in pages.
	Cache client.Reader
	// MaxGets bounds the Subscriptions one lookup reads whole because the cache does not hold
	// them at the listed resourceVersion (DefaultMaxSubscriptionGets when zero); past it the
	// lookup fails with ErrCapped.
	MaxGets int
}

// DefaultMaxSubscriptionGets is the most Subscriptions one lookup reads whole beside the cache:
// Subscriptions created or changed in the moment before the request, which the cache has not yet
// received. Each is at most the apiserver's largest object, read one at a time.
const DefaultMaxSubscriptionGets = 20

// Read names of olmguard_webhook_subscription_reads_total.
const (
	ReadConsistent = "consistent"
	ReadWatchCache = "watch-cache"
)

// List lists the namespace's Subscriptions live, a page at a time, and returns their trimmed
// views. With metadataOnly it lists metadata, which the apiserver sends as protobuf and without
// the spec and status.
func (l LiveSubscriptions) List(ctx context.Context, namespace string, metadataOnly bool) ([]v1alpha1.Subscription, error) {
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	read, first := ReadConsistent, []client.ListOption(nil)
	if l.WatchCache {
		read, first = ReadWatchCache, []client.ListOption{fromWatchCache()}
	}
	var out []v1alpha1.Subscription
	kept, maxBytes := 0, orDefaultInt(l.MaxViewBytes, DefaultMaxViewBytes)
	keep := func(s v1alpha1.Subscription) error {
		out = append(out, s)
		if kept += viewBytes(&s); kept > maxBytes {
			return fmt.Errorf("%w: the names and fields of the namespace's Subscriptions exceed %d bytes", ErrCapped, maxBytes)
		}
		return nil
	}
	page := &pager{Reader: l.Reader, Namespace: namespace, First: first, What: "Subscriptions",
		PageSize: int64(orDefaultInt(int(l.PageSize), DefaultSubscriptionPageSize)), MaxItems: orDefaultInt(l.MaxItems, DefaultMaxSubscriptions)}
	if metadataOnly || l.Cache != nil { // only metadata is listed
		page.PageSize = int64(orDefaultInt(int(l.MetadataPageSize), DefaultMetadataPageSize))
	}
	var err error
	switch {
	case !metadataOnly && l.Cache != nil:
		err = l.listThroughCache(ctx, namespace, page, keep)
	case metadataOnly:
		err = page.list(ctx, func() client.ObjectList {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.SubscriptionKind + "List"))
			return list
		}, func(list client.ObjectList) error {
			items := list.(*metav1.PartialObjectMetadataList).Items
			for i := range items {
				if err := keep(SubscriptionMetaView(&items[i].ObjectMeta)); err != nil {
					return err
				}
			}
			return nil
		})
	default:
		err = page.list(ctx, func() client.ObjectList { return &v1alpha1.SubscriptionList{} }, func(list client.ObjectList) error {
			items := list.(*v1alpha1.SubscriptionList).Items
			for i := range items {
				if err := keep(SubscriptionView(&items[i])); err != nil {
					return err
				}
			}
			return nil
		}, pageSlots)
	}
	if err != nil {
		return nil, err
	}
	metrics.SubscriptionReads.WithLabelValues(l.Webhook, read).Inc()
	return out, nil
}

// listThroughCache lists the namespace's Subscriptions as metadata and keeps, for each, the
// cache's trimmed view when it is at the listed UID and resourceVersion, or else the trimmed view
// of a consistent GET. A Subscription deleted between the list and its GET is left out: it no
// longer exists when the decision is made.
func (l LiveSubscriptions) listThroughCache(ctx context.Context, namespace string, page *pager, keep func(v1alpha1.Subscription) error) error {
	var listed []metav1.ObjectMeta
	err := page.list(ctx, func() client.ObjectList {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.SubscriptionKind + "List"))
		return list
	}, func(list client.ObjectList) error {
		for _, m := range list.(*metav1.PartialObjectMetadataList).Items {
			listed = append(listed, metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion, DeletionTimestamp: m.DeletionTimestamp})
		}
		return nil
	})
	if err != nil {
		return err
	}
	gets, maxGets := 0, orDefaultInt(l.MaxGets, DefaultMaxSubscriptionGets)
	for i := range listed {
		m := &listed[i]
		key := client.ObjectKey{Namespace: m.Namespace, Name: m.Name}
		cached := &v1alpha1.Subscription{}
		if err := l.Cache.Get(ctx, key, cached); err == nil && cached.UID == m.UID && cached.ResourceVersion == m.ResourceVersion {
			v := SubscriptionView(cached)
			v.DeletionTimestamp = m.DeletionTimestamp
			if err := keep(v); err != nil {
				return err
			}
			continue
		}
		if gets++; gets > maxGets {
			return fmt.Errorf("%w: more than %d Subscriptions in namespace %s changed since the webhook's cache last saw them", ErrCapped, maxGets, namespace)
		}
		v, found, err := l.getTrimmed(ctx, key)
		if err != nil {
			return err
		}
		if found {
			if err := keep(v); err != nil {
				return err
			}
		}
	}
	return nil
}

// Live reads the metadata of each named Subscription with a consistent GET, at most MaxGets of
// them (DefaultMaxSubscriptionGets when zero). More names than that are looked up in the
// namespace's metadata, listed a page at a time (List, bounded the same way): an update that
// drops every owner of a plan owned by a namespace's hundreds of Subscriptions must still be
// decided, not let through as too many to read (seen in the hostile tier's flood: 202 owners).
func (l LiveSubscriptions) Live(ctx context.Context, namespace string, names []string) (map[string]types.UID, error) {
	if maxGets := orDefaultInt(l.MaxGets, DefaultMaxSubscriptionGets); len(names) > maxGets {
		return l.liveFromList(ctx, namespace, names)
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	live := map[string]types.UID{}
	for _, name := range names {
		if len(validation.IsDNS1123Subdomain(name)) > 0 {
			continue // no Subscription has it: never sent to the apiserver
		}
		m := &metav1.PartialObjectMetadata{}
		m.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.SubscriptionKind))
		err := l.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading Subscription %s/%s: %w", namespace, name, err)
		case m.DeletionTimestamp == nil:
			live[name] = m.UID
		}
	}
	metrics.SubscriptionReads.WithLabelValues(l.Webhook, ReadConsistent).Inc()
	return live, nil
}

// liveFromList is Live from the namespace's metadata list.
func (l LiveSubscriptions) liveFromList(ctx context.Context, namespace string, names []string) (map[string]types.UID, error) {
	listed, err := l.List(ctx, namespace, true)
	if err != nil {
		return nil, err
	}
	named := make(map[string]bool, len(names))
	for _, n := range names {
		named[n] = true
	}
	live := map[string]types.UID{}
	for i := range listed {
		if s := &listed[i]; named[s.Name] && s.DeletionTimestamp == nil {
			live[s.Name] = s.UID
		}
	}
	return live, nil
}

// getTrimmed reads one whole Subscription, holding a page slot, and returns its trimmed view.
func (l LiveSubscriptions) getTrimmed(ctx context.Context, key client.ObjectKey) (v1alpha1.Subscription, bool, error) {
	select {
	case pageSlots <- struct{}{}:
		defer func() { <-pageSlots }()
	case <-ctx.Done():
		return v1alpha1.Subscription{}, false, fmt.Errorf("waiting to read Subscription %s: %w", key, ctx.Err())
	}
	s := &v1alpha1.Subscription{}
	if err := l.Reader.Get(ctx, key, s); err != nil {
		if apierrors.IsNotFound(err) {
			return v1alpha1.Subscription{}, false, nil
		}
		return v1alpha1.Subscription{}, false, err
	}
	return SubscriptionView(s), true, nil
}

// SubscriptionMetaView is the metadata of a Subscription a decision reads: nothing a tenant can
// make large but the name.
func SubscriptionMetaView(m *metav1.ObjectMeta) v1alpha1.Subscription {
	return v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, DeletionTimestamp: m.DeletionTimestamp}}
}

// SubscriptionView is what the policies read of a Subscription: its metadata view, spec.name,
// spec.installPlanApproval and the status fields of the approval guard and of F1.
func SubscriptionView(s *v1alpha1.Subscription) v1alpha1.Subscription {
	v := SubscriptionMetaView(&s.ObjectMeta)
	v.Spec.Package, v.Spec.InstallPlanApproval = s.Spec.Package, s.Spec.InstallPlanApproval
	v.Status.CurrentCSV, v.Status.InstalledCSV, v.Status.InstallPlanGeneration = s.Status.CurrentCSV, s.Status.InstalledCSV, s.Status.InstallPlanGeneration
	if ref := s.Status.InstallPlanRef; ref != nil {
		v.Status.InstallPlanRef = &corev1.ObjectReference{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}
	}
	return v
}

// viewBytes is the size of the strings a view keeps.
func viewBytes(s *v1alpha1.Subscription) int {
	n := len(s.Name) + len(s.Namespace) + len(s.UID) + len(s.Spec.Package) + len(s.Spec.InstallPlanApproval) +
		len(s.Status.CurrentCSV) + len(s.Status.InstalledCSV)
	if ref := s.Status.InstallPlanRef; ref != nil {
		n += len(ref.Namespace) + len(ref.Name) + len(ref.UID)
	}
	return n
}

// pager reads one namespace's objects of a kind in pages, hands each page to a function that
// keeps what it needs, and lets the page go before it reads the next.
type pager struct {
	Reader    client.Reader
	Namespace string
	// First are options of the first page only (a resourceVersion); later pages carry the
	// continue token, which reads at the first page's resourceVersion.
	First    []client.ListOption
	PageSize int64
	// MaxItems is the most objects read; more fail the read with ErrCapped.
	MaxItems int
	// What names the objects in errors.
	What string
}

// list reads every page into a new list from newList and calls keep with it. With slots, each
// page is read and kept while holding one of them.
func (p *pager) list(ctx context.Context, newList func() client.ObjectList, keep func(client.ObjectList) error, slots ...chan struct{}) error {
	read, cont := 0, ""
	for {
		opts := []client.ListOption{client.InNamespace(p.Namespace), client.Limit(p.PageSize)}
		if cont == "" {
			opts = append(opts, p.First...)
		} else {
			opts = append(opts, client.Continue(cont))
		}
		next, n, err := p.page(ctx, newList, keep, opts, slots)
		if err != nil {
			return err
		}
		if read += n; read > p.MaxItems {
			return fmt.Errorf("%w: more than %d %s in namespace %s", ErrCapped, p.MaxItems, p.What, p.Namespace)
		}
		if next == "" {
			return nil
		}
		cont = next
	}
}

// page reads one page and keeps what keep needs of it; the page itself is garbage once it returns.
func (p *pager) page(ctx context.Context, newList func() client.ObjectList, keep func(client.ObjectList) error, opts []client.ListOption, slots []chan struct{}) (string, int, error) {
	for _, s := range slots {
		select {
		case s <- struct{}{}:
			defer func() { <-s }()
		case <-ctx.Done():
			return "", 0, fmt.Errorf("waiting to read %s: %w", p.What, ctx.Err())
		}
	}
	list := newList()
	if err := p.Reader.List(ctx, list, opts...); err != nil {
		return "", 0, err
	}
	if err := keep(list); err != nil {
		return "", 0, err
	}
	return list.GetContinue(), meta.LenList(list), nil
}

func orDefaultInt(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
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
	if err := l.Reader.List(ctx, list, client.InNamespace(namespace), client.Limit(1), fromWatchCache()); err != nil {
		return false, err
	}
	return len(list.Items) > 0, nil
}

// fromWatchCache makes a List read the apiserver's watch cache instead of waiting for a
// consistent read: resourceVersion "1", resourceVersionMatch NotOlderThan, any state of the cache.
// Not resourceVersion "0", the usual spelling: with it the apiserver ignores the limit and sends
// every object at once. A new value each time: the client fills in the Raw options.
func fromWatchCache() client.ListOption {
	return &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "1", ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}}
}

func orDefault(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultLookupTimeout
	}
	return d
}

// OperatorGroups reads a namespace's OperatorGroups for a handler.
type OperatorGroups interface {
	// List returns the metadata of the namespace's OperatorGroups (name, namespace, UID,
	// deletionTimestamp); an error wrapping ErrCapped when there are too many to consider.
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
	var out []metav1.ObjectMeta
	page := &pager{Reader: l.Reader, Namespace: namespace, What: "OperatorGroups", PageSize: operatorGroupPageSize, MaxItems: maxOperatorGroups}
	err := page.list(ctx, func() client.ObjectList {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(v1.GroupVersion.WithKind(olm.OperatorGroupKind + "List"))
		return list
	}, func(list client.ObjectList) error {
		for _, og := range list.(*metav1.PartialObjectMetadataList).Items {
			out = append(out, metav1.ObjectMeta{Name: og.Name, Namespace: og.Namespace, UID: og.UID, DeletionTimestamp: og.DeletionTimestamp})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Bounds of one OperatorGroup lookup: a namespace should hold one, and the metadata of each
// (OLM's annotations, managedFields) can be hundreds of kilobytes.
const (
	operatorGroupPageSize = 10
	maxOperatorGroups     = 100
)

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
