package cacheneeds

import (
	"hash/maphash"
	"maps"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Values that repeat across many cached objects are stored once: a kind's labels and annotations
// after Keep (every copy of an AllNamespaces operator carries the same olm.copiedFrom label and
// operator-namespace annotation) and an object's whole ownerReferences (OLM owns every
// InstallPlan of a namespace by all the namespace's Subscriptions: ten plans, one list). Cached
// objects are read through deep copies, so sharing is invisible to readers; nothing writes a
// cached object in place.
//
// A table finds a value by a hash of its content and compares the content before sharing, so a
// collision costs sharing, never correctness. The tables are bounded: what a tenant writes (a
// label value, an owner's name) decides the values, so each table keeps at most maxShareBytes and
// starts afresh when full. Objects already stored keep what they share; only later objects share
// anew.
const (
	maxShareBytes = 8 << 20
	// maxShareSize: larger values are stored per object, as before. They are rare, and sharing
	// them would let a few tenants' objects fill the table.
	maxShareSize = 4 << 10
)

var (
	shareSeed  = maphash.MakeSeed()
	sharedMaps = newShareTable(maps.Equal[map[string]string])
	sharedRefs = newShareTable(sameOwnerReferences)
)

// shareTable interns values of type V by the hash of their content.
type shareTable[V any] struct {
	same  func(a, b V) bool
	mu    sync.Mutex
	m     map[uint64]V
	bytes int
	// resets counts the times the table was full and started afresh (for tests).
	resets int
}

func newShareTable[V any](same func(a, b V) bool) *shareTable[V] {
	return &shareTable[V]{same: same, m: map[uint64]V{}}
}

// lookup returns the shared value equal to v, of hash h.
func (t *shareTable[V]) lookup(h uint64, v V) (V, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[h]
	if !ok || !t.same(s, v) {
		var zero V
		return zero, false
	}
	return s, true
}

// get returns the shared value equal to v, of hash h and about size bytes, storing v as it when
// there is none. A value of another content under the same hash stays, and v is not shared.
func (t *shareTable[V]) get(h uint64, v V, size int) V {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[h]; ok {
		if t.same(s, v) {
			return s
		}
		return v
	}
	if t.bytes+size > maxShareBytes {
		t.m, t.bytes = map[uint64]V{}, 0
		t.resets++
	}
	t.m[h] = v
	t.bytes += size
	return v
}

// ShareMap returns the one shared copy of a small labels or annotations map with m's entries
// (m itself when it is large, nil when empty).
func ShareMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 48 // a map entry: two strings and their headers
	}
	if size > maxShareSize {
		return m
	}
	sort.Strings(keys)
	var h maphash.Hash
	h.SetSeed(shareSeed)
	for _, k := range keys {
		h.WriteString(k)
		h.WriteByte(0)
		h.WriteString(m[k])
		h.WriteByte(0)
	}
	return sharedMaps.get(h.Sum64(), m, size)
}

// ShareOwnerReferences returns the one shared copy of refs, sized to their number, with every
// field of every reference equal, and each reference's apiVersion and kind interned (a sized copy
// of refs when they are large). It never writes refs: they may be shared already.
func ShareOwnerReferences(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return refs
	}
	var h maphash.Hash
	h.SetSeed(shareSeed)
	size := 0
	for _, r := range refs {
		for _, s := range []string{r.APIVersion, r.Kind, r.Name, string(r.UID), boolKey(r.Controller), boolKey(r.BlockOwnerDeletion)} {
			h.WriteString(s)
			h.WriteByte(0)
		}
		size += refSize + len(r.Name) + len(r.UID)
	}
	if size > maxShareSize {
		return internedCopy(refs)
	}
	sum := h.Sum64()
	if s, ok := sharedRefs.lookup(sum, refs); ok {
		return s
	}
	return sharedRefs.get(sum, internedCopy(refs), size)
}

// refSize is what one reference's struct costs in the shared slice.
const refSize = 80

// internedCopy is a copy of refs sized to their number, apiVersion and kind interned.
func internedCopy(refs []metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, len(refs))
	copy(out, refs)
	for i := range out {
		out[i].APIVersion, out[i].Kind = Intern(out[i].APIVersion), Intern(out[i].Kind)
	}
	return out
}

func sameOwnerReferences(a, b []metav1.OwnerReference) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.APIVersion != y.APIVersion || x.Kind != y.Kind || x.Name != y.Name || x.UID != y.UID ||
			!sameBool(x.Controller, y.Controller) || !sameBool(x.BlockOwnerDeletion, y.BlockOwnerDeletion) {
			return false
		}
	}
	return true
}

func sameBool(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func boolKey(p *bool) string {
	switch {
	case p == nil:
		return "-"
	case *p:
		return "t"
	default:
		return "f"
	}
}
