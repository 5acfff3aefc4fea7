package olmsim

import (
	"context"
	"encoding/json"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ownerRef builds an ownerReference the way OLM's ownerutil does.
func ownerRef(o client.Object, gvk schema.GroupVersionKind, controller, blockOwnerDeletion bool) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         gvk.GroupVersion().String(),
		Kind:               gvk.Kind,
		Name:               o.GetName(),
		UID:                o.GetUID(),
		Controller:         &controller,
		BlockOwnerDeletion: &blockOwnerDeletion,
	}
}

// addNonBlockingOwner is ownerutil.AddNonBlockingOwner: it appends a controller:false,
// blockOwnerDeletion:false reference unless one with the same kind, name and UID exists.
func addNonBlockingOwner(obj client.Object, owner client.Object, gvk schema.GroupVersionKind) {
	refs := obj.GetOwnerReferences()
	for _, r := range refs {
		if r.Kind == gvk.Kind && r.Name == owner.GetName() && r.UID == owner.GetUID() {
			return
		}
	}
	obj.SetOwnerReferences(append(refs, ownerRef(owner, gvk, false, false)))
}

// runLoop calls sync once, then after every watch event on list (filtered by opts) and every
// resync interval, until ctx is done. It stands in for an informer-driven queue.
func (s *Sim) runLoop(ctx context.Context, resync time.Duration, list client.ObjectList, opt client.ListOption, sync func(context.Context)) {
	if resync <= 0 {
		resync = 5 * time.Second
	}
	ticker := time.NewTicker(resync)
	defer ticker.Stop()
	sync(ctx)
	for ctx.Err() == nil {
		var events <-chan watch.Event
		w, err := s.watcher.Watch(ctx, list, opt)
		if err == nil {
			events = w.ResultChan()
		}
		for open := true; open && ctx.Err() == nil; {
			select {
			case <-ctx.Done():
			case _, open = <-events:
				if open {
					sync(ctx)
				}
			case <-ticker.C:
				sync(ctx)
				open = events != nil
			}
		}
		if w != nil {
			w.Stop()
		}
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func parseDuration(s string) (time.Duration, error) { return time.ParseDuration(s) }
