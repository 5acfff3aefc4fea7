package write_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/write"
	"github.com/olmguard/olmguard/test/testenv"
)

func TestMain(m *testing.M) {
	testenv.LogWhenVerbose()
	testenv.Main(m, nil)
}

// configMap creates a ConfigMap and returns it as read (its UID and resourceVersion).
func configMap(t *testing.T, c client.Client, ns, name string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

// touch writes the object as someone else would: its resourceVersion moves.
func touch(t *testing.T, c client.Client, cm *corev1.ConfigMap) {
	t.Helper()
	other := cm.DeepCopy()
	other.Data = map[string]string{"written": "by someone else"}
	if err := c.Update(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	if other.ResourceVersion == cm.ResourceVersion {
		t.Fatal("the update did not move the resourceVersion")
	}
}

// recreate deletes the object and creates another under the same name: a new UID.
func recreate(t *testing.T, c client.Client, cm *corev1.ConfigMap) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, cm.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name}}
	if err := c.Create(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again.UID == cm.UID {
		t.Fatal("the recreated object kept its UID")
	}
}

func gone(t *testing.T, c client.Client, cm *corev1.ConfigMap) {
	t.Helper()
	if err := c.Delete(context.Background(), cm.DeepCopy()); err != nil {
		t.Fatal(err)
	}
}

// A guarded patch writes the object as it was read or nothing: when anyone wrote it in between,
// the apiserver refuses the whole patch. A plain JSON patch applies to whatever is there.
// Checked to fail without the guard (GuardedJSONPatch sending ops alone): the two "refused" cases.
func TestJSONPatch(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ns := testenv.Namespace(t, c, "write-patch")
	label := []jsonpatch.Operation{jsonpatch.NewOperation("add", "/metadata/labels", map[string]string{"olmguard.io/test": "patched"})}
	for _, tc := range []struct {
		name        string
		guarded     bool
		ops         []jsonpatch.Operation
		before      func(*testing.T, client.Client, *corev1.ConfigMap) // between the read and the write
		wantPatched bool
		wantErr     func(error) bool // nil: no error
		wantLabel   bool             // the object there afterwards carries the label
	}{
		{name: "guarded, unchanged since read: patched", guarded: true, ops: label, wantPatched: true, wantLabel: true},
		{name: "guarded, written since read: refused, nothing written", guarded: true, ops: label, before: touch,
			wantErr: guardFailed},
		{name: "guarded, recreated since read: refused, nothing written", guarded: true, ops: label, before: recreate,
			wantErr: guardFailed},
		{name: "guarded, gone: nothing, no error", guarded: true, ops: label, before: gone},
		{name: "guarded, no operations: nothing sent, even on a moved object", guarded: true, before: touch},
		{name: "plain, written since read: patched all the same", ops: label, before: touch, wantPatched: true, wantLabel: true},
		{name: "plain, gone: nothing, no error", ops: label, before: gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cm := configMap(t, c, ns, "cm")
			t.Cleanup(func() { _ = c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}) })
			if tc.before != nil {
				tc.before(t, c, cm)
			}
			send := write.JSONPatch
			if tc.guarded {
				send = write.GuardedJSONPatch
			}
			patched, err := send(ctx, c, cm.DeepCopy(), tc.ops)
			switch {
			case tc.wantErr == nil && err != nil:
				t.Fatalf("error: %v", err)
			case tc.wantErr != nil && !tc.wantErr(err):
				t.Fatalf("error %v, want the guard's refusal", err)
			}
			if patched != tc.wantPatched {
				t.Errorf("patched = %v, want %v", patched, tc.wantPatched)
			}
			now := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(cm), now); apierrors.IsNotFound(err) {
				return
			} else if err != nil {
				t.Fatal(err)
			}
			if got := now.Labels["olmguard.io/test"] == "patched"; got != tc.wantLabel {
				t.Errorf("label written = %v, want %v", got, tc.wantLabel)
			}
		})
	}
}

// guardFailed tells the apiserver's refusal of a guarded patch: its test of the resourceVersion
// failed on the object as it is now (422, reason Invalid: the apiserver applies a JSON patch to
// the object it holds, so a moved resourceVersion fails the test op, not the optimistic lock).
func guardFailed(err error) bool {
	return apierrors.IsInvalid(err)
}

// A delete with a UID precondition deletes the object that was read and never another of the same
// name created since; with the resourceVersion too, never one written since. Checked to fail
// without the precondition (DeleteExact deleting by name): "exact, recreated under the same name".
func TestDelete(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ns := testenv.Namespace(t, c, "write-delete")
	for _, tc := range []struct {
		name        string
		unchanged   bool // DeleteUnchanged, else DeleteExact
		before      func(*testing.T, client.Client, *corev1.ConfigMap)
		wantDeleted bool
		wantLeft    bool // an object of that name exists afterwards
	}{
		{name: "exact, the object read: deleted", wantDeleted: true},
		{name: "exact, recreated under the same name: left alone", before: recreate, wantLeft: true},
		{name: "exact, written since read: deleted (only the UID is checked)", before: touch, wantDeleted: true},
		{name: "exact, gone: nothing, no error", before: gone},
		{name: "unchanged, the object read: deleted", unchanged: true, wantDeleted: true},
		{name: "unchanged, written since read: left alone", unchanged: true, before: touch, wantLeft: true},
		{name: "unchanged, recreated under the same name: left alone", unchanged: true, before: recreate, wantLeft: true},
		{name: "unchanged, gone: nothing, no error", unchanged: true, before: gone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cm := configMap(t, c, ns, "cm")
			t.Cleanup(func() { _ = c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}}) })
			if tc.before != nil {
				tc.before(t, c, cm)
			}
			del := write.DeleteExact
			if tc.unchanged {
				del = write.DeleteUnchanged
			}
			deleted, err := del(ctx, c, cm.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if deleted != tc.wantDeleted {
				t.Errorf("deleted = %v, want %v", deleted, tc.wantDeleted)
			}
			err = c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatal(err)
			}
			if left := err == nil; left != tc.wantLeft {
				t.Errorf("an object named %s left = %v, want %v", cm.Name, left, tc.wantLeft)
			}
		})
	}
}

// The nudge bumps the resync annotation and counts itself; a Subscription gone is no error and
// no nudge.
func TestNudge(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ns := testenv.Namespace(t, c, "write-nudge")
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		gone       bool
		wantNudged bool
	}{
		{name: "a Subscription: nudged", wantNudged: true},
		{name: "gone: nothing, no error", gone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			sub := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sub"},
				Spec: v1alpha1.SubscriptionSpec{Package: "p", CatalogSource: "c", CatalogSourceNamespace: ns}}
			if err := c.Create(ctx, sub); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = c.Delete(ctx, &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sub"}})
			})
			if tc.gone {
				if err := c.Delete(ctx, sub.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			before := testutil.ToFloat64(metrics.SubscriptionNudges)
			nudged, err := write.Nudge(ctx, c, sub.DeepCopy(), now)
			if err != nil {
				t.Fatal(err)
			}
			if nudged != tc.wantNudged {
				t.Errorf("nudged = %v, want %v", nudged, tc.wantNudged)
			}
			counted := testutil.ToFloat64(metrics.SubscriptionNudges) - before
			if want := map[bool]float64{true: 1}[tc.wantNudged]; counted != want {
				t.Errorf("nudges counted %v, want %v", counted, want)
			}
			if tc.gone {
				return
			}
			got := &v1alpha1.Subscription{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(sub), got); err != nil {
				t.Fatal(err)
			}
			if got.Annotations[olmguard.ResyncAnnotation] != now.Format(time.RFC3339Nano) {
				t.Errorf("resync annotation %q, want %q", got.Annotations[olmguard.ResyncAnnotation], now.Format(time.RFC3339Nano))
			}
		})
	}
}
