package firstlist

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/olmguard/olmguard/internal/cachepeek"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestSkipDropsOnlyTheInitialList(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	p := Skip()
	if p.Create(event.CreateEvent{Object: pod, IsInInitialList: true}) {
		t.Error("an initial-list Create passed")
	}
	if !p.Create(event.CreateEvent{Object: pod}) || !p.Update(event.UpdateEvent{ObjectOld: pod, ObjectNew: pod}) ||
		!p.Delete(event.DeleteEvent{Object: pod}) || !p.Generic(event.GenericEvent{Object: pod}) {
		t.Error("an event after the initial list was dropped")
	}
}

func TestUnlessKeepsWhatTheReconcilerActsOn(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, tc := range []struct {
		name    string
		obj     client.Object
		initial bool
		act     bool
		err     error
		want    bool
	}{
		{"initial, acted on", pod, true, true, nil, true},
		{"initial, nothing to do", pod, true, false, nil, false},
		{"initial, the cache unreadable: kept", pod, true, false, errors.New("not synced"), true},
		{"after the initial list, nothing to do: kept", pod, false, false, nil, true},
		{"another kind: kept", &corev1.Node{}, true, false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := false
			p := Unless(func(ctx context.Context, _ *corev1.Pod) (bool, error) {
				asked = true
				if _, ok := ctx.Deadline(); !ok {
					t.Error("the decision's context has no deadline")
				}
				return tc.act, tc.err
			})
			if got := p.Create(event.CreateEvent{Object: tc.obj, IsInInitialList: tc.initial}); got != tc.want {
				t.Errorf("Create = %v, want %v", got, tc.want)
			}
			if _, isPod := tc.obj.(*corev1.Pod); asked != (tc.initial && isPod) {
				t.Errorf("decision asked = %v, want it asked only for an initial-list object of its kind", asked)
			}
		})
	}
}

// The decisions of one predicate share one deadline, from its first initial-list event: a cache
// that never syncs keeps later objects at once instead of making each wait MaxWait.
func TestUnlessSharesOneDeadline(t *testing.T) {
	var deadlines []time.Time
	p := Unless(func(ctx context.Context, _ *corev1.Pod) (bool, error) {
		d, _ := ctx.Deadline()
		deadlines = append(deadlines, d)
		return false, nil
	})
	for i := range 3 {
		p.Create(event.CreateEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i)}}, IsInInitialList: true})
	}
	if len(deadlines) != 3 || !deadlines[0].Equal(deadlines[1]) || !deadlines[0].Equal(deadlines[2]) {
		t.Errorf("deadlines %v, want one shared by every decision", deadlines)
	}
}

// A decision that reads a cache which never syncs (here: one whose user may not list ConfigMaps,
// as olmguard may not list a kind an administrator kept from it) returns once the predicate's
// deadline passes and keeps the object, and the next decision returns at once: the informer's
// event handler is never held for good (it would be, with a read that ignores ctx).
func TestUnlessKeepsWhenTheCacheNeverSyncs(t *testing.T) {
	env := testenv.Start(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "nobody"}
	informers, err := cache.New(cfg, cache.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) { // started, as the manager's cache is before any event
		t.Fatal("the cache did not start")
	}

	var reads []error
	p := unlessWithin(time.Second, func(ctx context.Context, cm *corev1.ConfigMap) (bool, error) {
		_, err := cachepeek.Get[corev1.ConfigMap](ctx, informers, client.ObjectKeyFromObject(cm))
		reads = append(reads, err)
		return false, err
	})
	decided := make(chan bool)
	go func() {
		for _, name := range []string{"first", "second"} {
			decided <- p.Create(event.CreateEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}, IsInInitialList: true})
		}
	}()
	for i := range 2 {
		select {
		case kept := <-decided:
			if !kept {
				t.Errorf("decision %d dropped the object although the cache could not be read", i)
			}
		case <-time.After(testenv.Patience):
			t.Fatalf("decision %d still waits on a cache that never syncs after %s", i, testenv.Patience)
		}
	}
	for i, err := range reads {
		if err == nil {
			t.Errorf("read %d of a never-synced cache returned no error", i)
		}
	}
}
