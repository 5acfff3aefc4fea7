package cacheneeds

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestShareTablesAreBounded: what a tenant writes is part of the tables' keys, so distinct values
// without end (here 20,000 labels maps of 1 KiB and 20,000 owner lists) must not grow a table past
// maxShareBytes: it starts afresh instead. Fails without the bound: the table keeps every key.
func TestShareTablesAreBounded(t *testing.T) {
	maps, refs := newShareTable(sharedMaps.same), newShareTable(sharedRefs.same)
	defer func(m *shareTable[map[string]string], r *shareTable[[]metav1.OwnerReference]) {
		sharedMaps, sharedRefs = m, r
	}(sharedMaps, sharedRefs)
	sharedMaps, sharedRefs = maps, refs
	big := strings.Repeat("x", 1<<10)
	for i := range 20000 {
		ShareMap(map[string]string{"tenant": fmt.Sprint(big, i)})
		ShareOwnerReferences([]metav1.OwnerReference{{Kind: "Subscription", Name: fmt.Sprint(big, i), UID: "u"}})
	}
	for name, tb := range map[string]interface{ stats() (int, int) }{"maps": maps, "refs": refs} {
		bytes, resets := tb.stats()
		if bytes > maxShareBytes || resets == 0 {
			t.Errorf("%s table: %d bytes after %d resets, bound %d", name, bytes, resets, maxShareBytes)
		}
	}
}

// TestShareLeavesLargeValuesAlone: a map or owner list larger than maxShareSize is not a key of the
// tables (a few tenants' objects would fill them); it is stored per object, unchanged.
func TestShareLeavesLargeValuesAlone(t *testing.T) {
	m := map[string]string{"big": strings.Repeat("v", maxShareSize)}
	if got := ShareMap(m); reflect.ValueOf(got).Pointer() != reflect.ValueOf(m).Pointer() {
		t.Error("a large map was replaced")
	}
	refs := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: strings.Repeat("n", maxShareSize), UID: "u"}}
	got := ShareOwnerReferences(refs)
	if !reflect.DeepEqual(got, refs) || &got[0] == &refs[0] {
		t.Errorf("large references: got %+v", got)
	}
	if ShareMap(nil) != nil || ShareMap(map[string]string{}) != nil {
		t.Error("an empty map is not nil")
	}
}

func (t *shareTable[V]) stats() (int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.bytes, t.resets
}

// TestShareTablesCompareContent: a value under the hash of another (a collision, forced here) is
// not replaced by it, nor does it replace the shared one. Fails if the table trusted the hash.
func TestShareTablesCompareContent(t *testing.T) {
	tb := newShareTable(sharedMaps.same)
	a, b := map[string]string{"a": "1"}, map[string]string{"b": "2"}
	if got := tb.get(7, a, 10); !reflect.DeepEqual(got, a) {
		t.Fatalf("first value: %v", got)
	}
	if got := tb.get(7, b, 10); !reflect.DeepEqual(got, b) {
		t.Errorf("a colliding value was given the shared one: %v", got)
	}
	if got, ok := tb.lookup(7, b); ok {
		t.Errorf("lookup of a colliding value found %v", got)
	}
	if got, ok := tb.lookup(7, map[string]string{"a": "1"}); !ok || reflect.ValueOf(got).Pointer() != reflect.ValueOf(a).Pointer() {
		t.Errorf("lookup of an equal value: %v, %v", got, ok)
	}
}

// Two references that differ only in whether Controller is set, or set false, are not the same.
func TestSameOwnerReferences(t *testing.T) {
	yes, no := true, false
	base := metav1.OwnerReference{APIVersion: "v1", Kind: "K", Name: "n", UID: "u"}
	with := func(c *bool) []metav1.OwnerReference { r := base; r.Controller = c; return []metav1.OwnerReference{r} }
	yes2 := true
	for _, tc := range []struct {
		a, b []metav1.OwnerReference
		want bool
	}{
		{with(nil), with(nil), true},
		{with(&yes), with(&yes2), true},
		{with(&yes), with(&no), false},
		{with(nil), with(&no), false},
		{with(nil), nil, false},
	} {
		if got := sameOwnerReferences(tc.a, tc.b); got != tc.want {
			t.Errorf("sameOwnerReferences(%v, %v) = %v", tc.a, tc.b, got)
		}
	}
}
