package unpack_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/builders"
)

// 10,000 random inputs: valid DNS labels of at most 63 characters, distinct from OLM's name,
// stable, namespace-scoped, and never renamed again.
func TestUnpackJobNameProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]string{}
	for i := range 10000 {
		ns := fmt.Sprintf("ns-%d", rng.IntN(50))
		var name string
		switch i % 3 {
		case 0:
			name = olm.UnpackName(fmt.Sprintf("registry.example/bundle-%d:v%d", rng.Int(), i))
		case 1: // a retry unpack.Job: 58 characters of the hash plus 5 random
			name = olm.UnpackName(fmt.Sprint(rng.Int()))[:58] + fmt.Sprintf("%05x", rng.IntN(1<<20))
		default: // anything a client might send
			b := make([]byte, 1+rng.IntN(63))
			for j := range b {
				b[j] = "abcdefghijklmnopqrstuvwxyz0123456789-."[rng.IntN(38)]
			}
			name = string(b)
		}
		got := unpack.ScopedName(ns, name)
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 || len(got) > 63 {
			t.Fatalf("unpack.ScopedName(%q, %q) = %q: %v", ns, name, got, errs)
		}
		if got == name || got != unpack.ScopedName(ns, name) {
			t.Fatalf("unpack.ScopedName(%q, %q) = %q: must differ from OLM's name and be stable", ns, name, got)
		}
		if strings.HasPrefix(name, unpack.NamePrefix) {
			t.Fatalf("an OLM-style name %q starts with the rename prefix", name)
		}
		key := ns + "/" + name
		if prev, ok := seen[got]; ok && prev != key {
			t.Fatalf("%s and %s map to the same name %s", prev, key, got)
		}
		seen[got] = key
	}
	if unpack.ScopedName("a", "x") == unpack.ScopedName("b", "x") {
		t.Error("the name must depend on the namespace")
	}
}

func TestUnpackJobPatch(t *testing.T) {
	mod := func(f func(*unpack.Job)) unpack.Job { j := builders.UnpackJob(); f(&j); return j }
	tests := []struct {
		name string
		job  unpack.Job
		ops  []string
	}{
		{"OLM unpack unpack.Job: renamed and given a TTL", builders.UnpackJob(), []string{"replace /metadata/name", "add /spec/ttlSecondsAfterFinished"}},
		{"TTL set by OLM v0.43+: kept", mod(func(j *unpack.Job) { j.HasTTL = true }), []string{"replace /metadata/name"}},
		{"no unpack label (OLM <= v0.25): untouched", mod(func(j *unpack.Job) { delete(j.Labels, olm.BundleUnpackRefLabel) }), nil},
		{"not olm.managed: untouched", mod(func(j *unpack.Job) { j.Labels[olm.ManagedLabel] = "false" }), nil},
		{"not owned by a ConfigMap: untouched", mod(func(j *unpack.Job) { j.OwnerReferences = nil }), nil},
		{"renamed already: untouched", mod(func(j *unpack.Job) { j.Name = unpack.ScopedName(j.Namespace, j.Name) }), nil},
		{"no name yet: untouched", mod(func(j *unpack.Job) { j.Name, j.GenerateName = "", "x-" }), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, op := range unpack.RenamePatch(tt.job, 600) {
				got = append(got, op.Operation+" "+op.Path)
			}
			if strings.Join(got, ",") != strings.Join(tt.ops, ",") {
				t.Errorf("ops = %v, want %v", got, tt.ops)
			}
		})
	}
}
