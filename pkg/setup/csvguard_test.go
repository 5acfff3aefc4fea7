package setup_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/testenv"
)

// The finalizer guard through the apiserver: labelling a CSV whose cleanup is pending as one of
// OLM's copies (olm.copiedFrom) does not let anyone but the controller remove olmguard's
// finalizer, in two updates (label, then remove) or in one. OLM sets olm.copiedFrom only when it
// creates a copy, and olmguard never puts its finalizer on a copy.
// Fails before the fix (two steps): the validating webhook had an object selector
// "olm.copiedFrom does not exist", which the apiserver checks against both the old and the new
// object; once the label was on both, the removal was never sent to olmguard and went through.
// The one-step case passed before the fix too (the old object, without the label, matched) and
// is kept so that a selector on the new object alone cannot come back.
func TestCleanupFinalizerGuardIgnoresCopyLabel(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "copy-label")
	for _, tc := range []struct {
		name     string
		twoSteps bool
	}{{"label-then-remove", true}, {"label-and-remove", false}} {
		t.Run(tc.name, func(t *testing.T) {
			csv := &v1alpha1.ClusterServiceVersion{
				ObjectMeta: metav1.ObjectMeta{Name: tc.name + ".v1", Namespace: ns, Finalizers: []string{olmguard.CleanupFinalizer}},
				Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: tc.name,
					InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}},
			}
			if err := env.Client.Create(ctx, csv); err != nil {
				t.Fatal(err)
			}
			if err := env.Client.Delete(ctx, csv); err != nil {
				t.Fatal(err)
			}
			get := func() {
				t.Helper()
				if err := env.Client.Get(ctx, client.ObjectKeyFromObject(csv), csv); err != nil {
					t.Fatal(err)
				}
			}
			get()
			if csv.DeletionTimestamp == nil {
				t.Fatal("the CSV is not held by olmguard's finalizer")
			}
			csv.Labels = map[string]string{olm.CopiedFromLabel: "elsewhere"}
			if tc.twoSteps {
				if err := env.Client.Update(ctx, csv); err != nil {
					t.Fatalf("adding the label alone: %v", err)
				}
				get()
			}
			csv.Finalizers = slices.DeleteFunc(csv.Finalizers, func(f string) bool { return f == olmguard.CleanupFinalizer })
			err := env.Client.Update(ctx, csv)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may not remove "+olmguard.CleanupFinalizer) {
				t.Fatalf("removing the finalizer of a CSV labelled as a copy: %v, want the guard's denial", err)
			}
			get()
			if !slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
				t.Fatal("the finalizer is gone")
			}
			// The documented way out lets the test clean up.
			csv.Annotations = map[string]string{olmguard.CleanupAnnotation: olmguard.CleanupDisabled}
			csv.Finalizers = nil
			if err := env.Client.Update(ctx, csv); err != nil {
				t.Fatalf("opting out: %v", err)
			}
		})
	}
}

// Before any deletion: a CSV labelled as a copy in one update and stripped of olmguard's finalizer
// in the next gets the finalizer back from the mutating webhook, so its later deletion still runs
// the cleanup. Fails before the fix: the mutating webhook's object selector on olm.copiedFrom kept
// the second update from being sent, and the handler would have taken the label for OLM's.
func TestCleanupFinalizerKeptWhenLabelledAsCopy(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	ns := testenv.Namespace(t, env.Client, "copy-label-live")
	csv := &v1alpha1.ClusterServiceVersion{
		ObjectMeta: metav1.ObjectMeta{Name: "live.v1", Namespace: ns},
		Spec:       v1alpha1.ClusterServiceVersionSpec{DisplayName: "live", InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}},
	}
	if err := env.Client.Create(ctx, csv); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
		t.Fatalf("finalizers %v: the webhook did not add olmguard's", csv.Finalizers)
	}
	csv.Labels = map[string]string{olm.CopiedFromLabel: "elsewhere"}
	if err := env.Client.Update(ctx, csv); err != nil {
		t.Fatal(err)
	}
	csv.Finalizers = slices.DeleteFunc(csv.Finalizers, func(f string) bool { return f == olmguard.CleanupFinalizer })
	if err := env.Client.Update(ctx, csv); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer) {
		t.Fatalf("finalizers %v after the update: olmguard's was not put back", csv.Finalizers)
	}
}
