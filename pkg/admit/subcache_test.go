package admit

import (
	"context"
	"errors"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

var subscriptionsResource = schema.GroupResource{Group: "operators.coreos.com", Resource: "subscriptions"}

// liveReader is the apiserver: paged lists (pagingReader) and GETs of single Subscriptions,
// recorded by name. The Subscription named gone is listed but deleted before its GET.
type liveReader struct {
	pagingReader
	gets []string
	gone string
}

func (r *liveReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.gets = append(r.gets, key.Name)
	for _, s := range r.subs {
		if s.Name == r.gone {
			continue
		}
		if s.Name == key.Name {
			s.DeepCopyInto(obj.(*v1alpha1.Subscription))
			return nil
		}
	}
	return apierrors.NewNotFound(subscriptionsResource, key.Name)
}

// mapCache is the webhook's cache: trimmed Subscriptions by name.
type mapCache map[string]v1alpha1.Subscription

func (c mapCache) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	s, ok := c[key.Name]
	if !ok {
		return apierrors.NewNotFound(subscriptionsResource, key.Name)
	}
	s.DeepCopyInto(obj.(*v1alpha1.Subscription))
	return nil
}

func (c mapCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("a lookup never lists the cache: the live list says which Subscriptions exist")
}

// The lookup through the cache: the live metadata list says which Subscriptions exist; the cache
// gives the fields of those it holds at the listed UID and resourceVersion; every other one is
// read with its own GET (a Subscription gone by then is left out), at most MaxGets of them.
func TestSubscriptionLookupThroughCache(t *testing.T) {
	live := func() []v1alpha1.Subscription {
		subs := largeSubscriptions(30)
		for i := range subs {
			subs[i].ResourceVersion = "10"
		}
		return subs
	}
	warm := func(subs []v1alpha1.Subscription) mapCache {
		c := mapCache{}
		for i := range subs {
			v, _ := TrimSubscription(&subs[i])
			c[subs[i].Name] = *v.(*v1alpha1.Subscription)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		// change the cache and the live objects after the cache was filled from them
		change   func(c mapCache, subs []v1alpha1.Subscription) []v1alpha1.Subscription
		gone     string // listed, deleted before its GET
		maxGets  int
		wantGets []string
		want     int    // Subscriptions returned
		capped   bool   // the lookup fails with ErrCapped
		pkg7     string // spec.name of sub-7 in the answer
	}{
		{name: "cache holds all", change: func(c mapCache, s []v1alpha1.Subscription) []v1alpha1.Subscription { return s },
			want: 30, pkg7: "pkg-7"},
		{name: "changed after the cache saw it", change: func(c mapCache, s []v1alpha1.Subscription) []v1alpha1.Subscription {
			s[7].ResourceVersion, s[7].Spec.Package = "11", "pkg-renamed"
			return s
		}, wantGets: []string{"sub-7"}, want: 30, pkg7: "pkg-renamed"},
		{name: "recreated with the same name", change: func(c mapCache, s []v1alpha1.Subscription) []v1alpha1.Subscription {
			s[7].UID, s[7].Spec.Package = "uid-new", "pkg-recreated"
			return s
		}, wantGets: []string{"sub-7"}, want: 30, pkg7: "pkg-recreated"},
		{name: "created just before, not yet cached", change: func(c mapCache, s []v1alpha1.Subscription) []v1alpha1.Subscription {
			delete(c, "sub-7")
			return s
		}, wantGets: []string{"sub-7"}, want: 30, pkg7: "pkg-7"},
		{name: "deleted between the list and the GET", change: func(c mapCache, s []v1alpha1.Subscription) []v1alpha1.Subscription {
			delete(c, "sub-29")
			return s
		}, gone: "sub-29", wantGets: []string{"sub-29"}, want: 29, pkg7: "pkg-7"},
		{name: "more stale than MaxGets", change: func(c mapCache, s []v1alpha1.Subscription) []v1alpha1.Subscription {
			for i := range 4 {
				delete(c, fmt.Sprintf("sub-%d", i))
			}
			return s
		}, maxGets: 3, wantGets: []string{"sub-0", "sub-1", "sub-2"}, capped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			subs := live()
			c := warm(subs)
			subs = tc.change(c, subs)
			r := &liveReader{pagingReader: pagingReader{subs: subs}, gone: tc.gone}
			l := LiveSubscriptions{Reader: r, Cache: c, MaxGets: tc.maxGets, Webhook: "test-cache"}
			got, err := l.List(context.Background(), "ns", false)
			if tc.capped {
				if !errors.Is(err, ErrCapped) {
					t.Fatalf("error %v, want ErrCapped", err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(r.gets) != fmt.Sprint(tc.wantGets) {
				t.Errorf("GETs %v, want %v", r.gets, tc.wantGets)
			}
			for _, req := range r.requests {
				if req.Limit <= 0 || req.Limit > DefaultMetadataPageSize {
					t.Errorf("list limit %d, want 1 to %d (a list of metadata)", req.Limit, DefaultMetadataPageSize)
				}
			}
			if tc.capped {
				return
			}
			if len(got) != tc.want {
				t.Fatalf("%d Subscriptions, want %d", len(got), tc.want)
			}
			if got[7].Spec.Package != tc.pkg7 {
				t.Errorf("sub-7's package %q, want %q", got[7].Spec.Package, tc.pkg7)
			}
			for _, s := range got {
				if len(s.Annotations) > 0 || len(s.Status.Conditions) > 0 {
					t.Fatalf("%s kept its annotations or conditions", s.Name)
				}
			}
		})
	}
}

// The cache's transform keeps what the decisions read and the resourceVersion, nothing else.
func TestTrimSubscription(t *testing.T) {
	s := largeSubscriptions(1)[0]
	s.ResourceVersion, s.Labels, s.ManagedFields = "42", map[string]string{"a": "b"}, []metav1.ManagedFieldsEntry{{Manager: "m"}}
	v, err := TrimSubscription(&s)
	if err != nil {
		t.Fatal(err)
	}
	got := v.(*v1alpha1.Subscription)
	want := SubscriptionView(&s)
	want.ResourceVersion = "42"
	if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", want) {
		t.Errorf("trimmed %+v, want %+v", *got, want)
	}
	if other, _ := TrimSubscription("tombstone"); other != "tombstone" {
		t.Errorf("a non-Subscription changed: %v", other)
	}
}
