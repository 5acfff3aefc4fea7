package firstlist

import (
	"context"
	"errors"
	"testing"

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
