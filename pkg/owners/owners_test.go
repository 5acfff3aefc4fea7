package owners

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/test/patchtest"
)

func names(subs []Subscription) []string {
	var out []string
	for _, s := range subs {
		out = append(out, s.Name)
	}
	return out
}

func TestInstallPlanOwners(t *testing.T) {
	a := Subscription{Name: "a", UID: "uid-a"}
	b := Subscription{Name: "b", UID: "uid-b", InstallPlanRef: "install-1"}
	c := Subscription{Name: "c", UID: "uid-c", InstallPlanRef: "install-2"}
	gone := Subscription{Name: "d", UID: "uid-d", Deleting: true, InstallPlanRef: "install-1"}
	tests := []struct {
		name    string
		op      Operation
		plan    string
		uid     types.UID
		oldRefs []metav1.OwnerReference
		subs    []Subscription
		want    []string
	}{
		{"create: every live Subscription", Create, "", "", nil, []Subscription{c, a, b}, []string{"a", "b", "c"}},
		{"create: never one being deleted", Create, "", "", nil, []Subscription{a, gone}, []string{"a"}},
		{"create: none", Create, "", "", nil, nil, nil},
		{"update: those naming the plan", Update, "install-1", "", nil, []Subscription{a, b, c}, []string{"b"}},
		{"update: old owners that still exist come back", Update, "install-1", "", []metav1.OwnerReference{SubscriptionOwnerRef("a", "uid-old")}, []Subscription{a, b, c}, []string{"a", "b"}},
		{"update: old owner that is gone is not added", Update, "install-1", "", []metav1.OwnerReference{SubscriptionOwnerRef("zz", "uid-zz")}, []Subscription{a, b}, []string{"b"}},
		{"update: deleting never added even if named", Update, "install-1", "", []metav1.OwnerReference{SubscriptionOwnerRef("d", "uid-d")}, []Subscription{gone}, nil},
		{"update: other kinds in old refs are ignored", Update, "install-9", "", []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "a"}}, []Subscription{a}, nil},
		{"update: a ref of another group is not a Subscription", Update, "install-9", "", []metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Subscription", Name: "a"}}, []Subscription{a}, nil},
		{"update: a ref to an older plan of the same name is not this plan", Update, "install-1", "uid-new", nil,
			[]Subscription{{Name: "e", UID: "uid-e", InstallPlanRef: "install-1", InstallPlanRefUID: "uid-old"}}, nil},
		{"update: a ref with the plan's UID counts", Update, "install-1", "uid-new", nil,
			[]Subscription{{Name: "e", UID: "uid-e", InstallPlanRef: "install-1", InstallPlanRefUID: "uid-new"}}, []string{"e"}},
		{"subscriptions without a UID are skipped", Create, "", "", nil, []Subscription{{Name: "x"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := names(InstallPlanOwners(tt.op, tt.plan, tt.uid, tt.oldRefs, tt.subs))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("owners (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOwnerReferencesPatch(t *testing.T) {
	cm := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "uid-cm"}
	a, b := Subscription{Name: "a", UID: "uid-a"}, Subscription{Name: "b", UID: "uid-b"}
	tests := []struct {
		name   string
		refs   []metav1.OwnerReference
		owners []Subscription
		want   []metav1.OwnerReference
		nOps   int
	}{
		{"no field: added whole", nil, []Subscription{a, b}, []metav1.OwnerReference{SubscriptionOwnerRef("a", "uid-a"), SubscriptionOwnerRef("b", "uid-b")}, 1},
		{"appended after OLM's refs, order kept", []metav1.OwnerReference{cm, SubscriptionOwnerRef("a", "uid-a")}, []Subscription{a, b},
			[]metav1.OwnerReference{cm, SubscriptionOwnerRef("a", "uid-a"), SubscriptionOwnerRef("b", "uid-b")}, 1},
		{"already right: no ops", []metav1.OwnerReference{SubscriptionOwnerRef("b", "uid-b"), SubscriptionOwnerRef("a", "uid-a")}, []Subscription{a, b},
			[]metav1.OwnerReference{SubscriptionOwnerRef("b", "uid-b"), SubscriptionOwnerRef("a", "uid-a")}, 0},
		{"stale UID replaced in place", []metav1.OwnerReference{cm, SubscriptionOwnerRef("a", "uid-stale")}, []Subscription{a},
			[]metav1.OwnerReference{cm, SubscriptionOwnerRef("a", "uid-a")}, 1},
		{"nothing removed: refs to others stay", []metav1.OwnerReference{SubscriptionOwnerRef("x", "uid-x")}, []Subscription{a},
			[]metav1.OwnerReference{SubscriptionOwnerRef("x", "uid-x"), SubscriptionOwnerRef("a", "uid-a")}, 1},
		{"empty list: appended", []metav1.OwnerReference{}, []Subscription{a}, []metav1.OwnerReference{SubscriptionOwnerRef("a", "uid-a")}, 1},
		{"no owners: no ops", []metav1.OwnerReference{cm}, nil, []metav1.OwnerReference{cm}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := patchtest.PlanJSON(t, tt.refs)
			ops := OwnerReferencesPatch(tt.refs, tt.owners)
			if len(ops) != tt.nOps {
				t.Errorf("got %d ops %v, want %d", len(ops), ops, tt.nOps)
			}
			got := patchtest.OwnerRefs(t, patchtest.Apply(t, doc, ops))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ownerReferences after patch (-want +got):\n%s", diff)
			}
			// Idempotent: the patched object needs nothing more.
			if again := OwnerReferencesPatch(got, tt.owners); len(again) != 0 {
				t.Errorf("second patch not empty: %v", again)
			}
		})
	}
}

func TestSubscriptionOwnerRefIsNonBlocking(t *testing.T) {
	r := SubscriptionOwnerRef("s", types.UID("u"))
	if r.APIVersion != "operators.coreos.com/v1alpha1" || r.Kind != "Subscription" || *r.Controller || *r.BlockOwnerDeletion {
		t.Fatalf("reference %+v is not OLM's non-blocking owner reference", r)
	}
}

func TestDroppedOwners(t *testing.T) {
	ref := func(name, uid string) metav1.OwnerReference { return SubscriptionOwnerRef(name, types.UID(uid)) }
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Subscription", Name: "b", UID: "uid-b"}
	live := map[string]types.UID{"a": "uid-a", "b": "uid-b"}
	tests := []struct {
		name     string
		old, new []metav1.OwnerReference
		want     []string
	}{
		{"nothing dropped", []metav1.OwnerReference{ref("a", "uid-a")}, []metav1.OwnerReference{ref("a", "uid-a"), ref("b", "uid-b")}, nil},
		{"live one dropped", []metav1.OwnerReference{ref("a", "uid-a"), ref("b", "uid-b")}, []metav1.OwnerReference{ref("a", "uid-a")}, []string{"b"}},
		{"dead one dropped is fine", []metav1.OwnerReference{ref("gone", "uid-gone")}, nil, nil},
		{"stale UID dropped is fine", []metav1.OwnerReference{ref("a", "uid-old")}, nil, nil},
		{"all dropped", []metav1.OwnerReference{ref("b", "uid-b"), ref("a", "uid-a")}, nil, []string{"a", "b"}},
		{"another group's Subscription is not OLM's", []metav1.OwnerReference{other}, nil, nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, DroppedOwners(tt.old, tt.new, live)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
