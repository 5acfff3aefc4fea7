// Package write is the one path by which olmguard's reconcilers and its uninstall write what the
// knowledge packages decide: a hand-built JSON patch (guarded, when asked, by the resourceVersion
// that was read), a delete of exactly the object that was read (UID precondition, and
// resourceVersion when asked), the resync nudge that makes OLM reconcile a Subscription again, and
// the F1 owner repair both the installplan-owners and the subscription-drift reconcilers apply.
//
// Every write reports whether it changed something. An object that is gone, or that a delete finds
// replaced by another of the same name, is no error: the caller reads again on its next event.
// Any other failure, a guarded patch's included, is returned as the apiserver said it.
package write

import (
	"context"
	"encoding/json"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Guard returns ops preceded by a test that the object's resourceVersion is still rv: the patch
// then applies to the object as it was read, or fails as a whole.
func Guard(rv string, ops []jsonpatch.Operation) []jsonpatch.Operation {
	return append([]jsonpatch.Operation{jsonpatch.NewOperation("test", "/metadata/resourceVersion", rv)}, ops...)
}

// JSONPatch sends ops as one JSON patch of obj (nothing when there are none) and reports whether
// it patched.
func JSONPatch(ctx context.Context, c client.Writer, obj client.Object, ops []jsonpatch.Operation) (bool, error) {
	if len(ops) == 0 {
		return false, nil
	}
	body, err := json.Marshal(ops)
	if err != nil {
		return false, err
	}
	return done(c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, body)))
}

// GuardedJSONPatch is JSONPatch guarded by obj's resourceVersion (Guard): if anyone wrote obj
// since it was read, the apiserver refuses the whole patch and the error says so.
func GuardedJSONPatch(ctx context.Context, c client.Writer, obj client.Object, ops []jsonpatch.Operation) (bool, error) {
	if len(ops) == 0 {
		return false, nil
	}
	return JSONPatch(ctx, c, obj, Guard(obj.GetResourceVersion(), ops))
}

// MergePatch sends a hand-built JSON merge patch of obj and reports whether it patched.
func MergePatch(ctx context.Context, c client.Writer, obj client.Object, patch []byte) (bool, error) {
	return done(c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)))
}

// DeleteExact deletes obj only if it is still the object that was read (a UID precondition): an
// object deleted and created again under the same name is left alone. It reports whether it
// deleted.
func DeleteExact(ctx context.Context, c client.Writer, obj client.Object, opts ...client.DeleteOption) (bool, error) {
	uid := obj.GetUID()
	return deleted(c.Delete(ctx, obj, append(opts[:len(opts):len(opts)], client.Preconditions{UID: &uid})...))
}

// DeleteUnchanged deletes obj only if nobody wrote it since it was read (UID and resourceVersion
// preconditions). It reports whether it deleted.
func DeleteUnchanged(ctx context.Context, c client.Writer, obj client.Object, opts ...client.DeleteOption) (bool, error) {
	uid, rv := obj.GetUID(), obj.GetResourceVersion()
	return deleted(c.Delete(ctx, obj, append(opts[:len(opts):len(opts)], client.Preconditions{UID: &uid, ResourceVersion: &rv})...))
}

// Nudge bumps olmguard's resync annotation on sub to now (drift.NudgePatch), which makes OLM's
// catalog-operator reconcile the Subscription and resolve its namespace again at once, and counts
// it. It reports whether it nudged (not when the Subscription is gone).
func Nudge(ctx context.Context, c client.Writer, sub *v1alpha1.Subscription, now time.Time) (bool, error) {
	ok, err := MergePatch(ctx, c, sub, drift.NudgePatch(now))
	if ok {
		metrics.SubscriptionNudges.Inc()
	}
	return ok, err
}

// done maps a write's error: an object gone is no error, and nothing was written.
func done(err error) (bool, error) {
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// deleted maps a delete's error: an object gone, or replaced (a precondition failed), is no error,
// and nothing was deleted.
func deleted(err error) (bool, error) {
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return false, nil
	}
	return err == nil, err
}
