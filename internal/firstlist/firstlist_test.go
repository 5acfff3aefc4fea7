package firstlist

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
