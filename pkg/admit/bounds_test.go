package admit

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// pagingReader serves a namespace's Subscriptions as the apiserver does: at most Limit a
// response, a continue token while more are left, and every object at once when the limit is
// missing or the resourceVersion is "0" (the watch cache ignores the limit then). It records each
// request and the largest response.
type pagingReader struct {
	client.Reader
	subs     []v1alpha1.Subscription
	requests []metav1.ListOptions
	largest  int
}

func (r *pagingReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	req := *o.AsListOptions()
	r.requests = append(r.requests, req)
	start := 0
	if req.Continue != "" {
		var err error
		if start, err = strconv.Atoi(req.Continue); err != nil {
			return err
		}
	}
	end := len(r.subs)
	if req.Limit > 0 && req.ResourceVersion != "0" && start+int(req.Limit) < end {
		end = start + int(req.Limit)
	}
	page := r.subs[start:end]
	r.largest = max(r.largest, len(page))
	cont := ""
	if end < len(r.subs) {
		cont = strconv.Itoa(end)
	}
	switch l := list.(type) {
	case *v1alpha1.SubscriptionList:
		l.Items, l.Continue = append([]v1alpha1.Subscription(nil), page...), cont
	case *metav1.PartialObjectMetadataList:
		l.Items = nil
		for _, s := range page {
			l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: s.ObjectMeta})
		}
		l.Continue = cont
	default:
		return fmt.Errorf("unexpected list %T", list)
	}
	return nil
}

// largeSubscriptions are n Subscriptions whose status carries a long condition message, as
// spec.config would (the typed view has no spec.config).
func largeSubscriptions(n int) []v1alpha1.Subscription {
	big := strings.Repeat("x", 64<<10)
	out := make([]v1alpha1.Subscription, n)
	for i := range out {
		out[i] = v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("sub-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Annotations: map[string]string{"big": big}},
			Spec:   v1alpha1.SubscriptionSpec{Package: fmt.Sprintf("pkg-%d", i), InstallPlanApproval: v1alpha1.ApprovalAutomatic},
			Status: v1alpha1.SubscriptionStatus{Conditions: []v1alpha1.SubscriptionCondition{{Type: v1alpha1.SubscriptionResolutionFailed, Message: big}}}}
	}
	return out
}

// The Subscription lookup reads at most 10 Subscriptions per response however many the namespace
// holds (a tenant decides their number and their size), in every mode, and still returns all of
// them, trimmed to the fields the decisions read. Consistency: the first page of the default read
// has no resourceVersion (a consistent List), and later pages carry only the continue token, so
// they are read at the first page's resourceVersion (docs/f1-guarantee.md).
//
// Fails before the fix: the lookup sent one List with no limit, and the fake apiserver answered
// all 200 Subscriptions in one response (and the watch-cache read, resourceVersion "0", would
// have had its limit ignored by the apiserver).
func TestSubscriptionLookupReadsPages(t *testing.T) {
	for _, watchCache := range []bool{false, true} {
		for _, metadataOnly := range []bool{false, true} {
			name := fmt.Sprintf("watchCache=%v metadataOnly=%v", watchCache, metadataOnly)
			r := &pagingReader{subs: largeSubscriptions(200)}
			got, err := (LiveSubscriptions{Reader: r, WatchCache: watchCache, Webhook: "test-pages"}).List(context.Background(), "ns", metadataOnly)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if len(got) != 200 {
				t.Errorf("%s: %d Subscriptions, want 200", name, len(got))
			}
			// Whole Subscriptions 10 to a page; metadata, which the apiserver bounds to about
			// 300 KB an object, 50.
			limit := int64(DefaultSubscriptionPageSize)
			if metadataOnly {
				limit = DefaultMetadataPageSize
			}
			if int64(r.largest) > limit {
				t.Errorf("%s: a response held %d Subscriptions, want at most %d", name, r.largest, limit)
			}
			for i, req := range r.requests {
				switch {
				case req.Limit <= 0 || req.Limit > limit:
					t.Errorf("%s: request %d limit %d, want 1 to %d", name, i, req.Limit, limit)
				case i == 0 && !watchCache && req.ResourceVersion != "":
					t.Errorf("%s: first request resourceVersion %q, want none (a consistent List)", name, req.ResourceVersion)
				case i > 0 && (req.ResourceVersion != "" || req.Continue == ""):
					t.Errorf("%s: request %d resourceVersion %q continue %q, want only a continue token", name, i, req.ResourceVersion, req.Continue)
				}
			}
			for _, s := range got {
				if len(s.Annotations) > 0 || len(s.Status.Conditions) > 0 {
					t.Fatalf("%s: %s kept its annotations or conditions: the view must hold only what the decisions read", name, s.Name)
				}
			}
			if !metadataOnly && (got[7].Spec.Package != "pkg-7" || got[7].UID != "uid-7") {
				t.Errorf("%s: view %+v lost a field the policies read", name, got[7])
			}
		}
	}
}

// OperatorGroups are read 10 to a page too, and a namespace with more than 100 fails the lookup
// as too many to consider (a namespace should hold one; the metadata of each can be hundreds of
// kilobytes). The Job webhook's CatalogSource check reads one.
//
// Fails before the fix: one List with no limit returned all of them, 150 as well as 50, and the
// CatalogSource check read every CatalogSource of the namespace.
func TestOtherLookupsReadPages(t *testing.T) {
	for _, n := range []int{50, 150} {
		r := &pagingReader{subs: largeSubscriptions(n)}
		got, err := (LiveOperatorGroups{Reader: r}).List(context.Background(), "ns")
		switch {
		case n <= 100 && (err != nil || len(got) != n):
			t.Errorf("%d OperatorGroups: %d read, error %v; want all", n, len(got), err)
		case n > 100 && (err == nil || !strings.Contains(err.Error(), "too many")):
			t.Errorf("%d OperatorGroups: %d read, error %v; want too many to consider", n, len(got), err)
		}
		if r.largest > 10 {
			t.Errorf("%d OperatorGroups: a response held %d, want at most 10", n, r.largest)
		}
		for _, g := range got {
			if len(g.Annotations) > 0 {
				t.Fatalf("OperatorGroup %s kept its annotations: the lookup keeps only what the policy reads", g.Name)
			}
		}
	}
	r := &pagingReader{subs: largeSubscriptions(50)}
	if ok, err := (LiveCatalogNamespaces{Reader: r}).HasCatalogSource(context.Background(), "ns"); err != nil || !ok || r.largest != 1 {
		t.Errorf("HasCatalogSource: %v, %v, largest response %d; want true from one CatalogSource", ok, err, r.largest)
	}
}
