package cleanup

import (
	"slices"
	"strconv"

	"gomodules.xyz/jsonpatch/v2"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/review"
)

// CSVView is what the cleanup finalizer decision reads of a CSV.
type CSVView struct {
	Namespace   string
	Labels      map[string]string
	Annotations map[string]string
	Finalizers  []string
	Deleting    bool
	// Reason is status.reason ("Copied" on copies).
	Reason string
}

// Copied is OLM's IsCopied on the view.
func (c CSVView) Copied() bool {
	return olm.IsCopiedCSV(c.Namespace, c.Labels, c.Annotations, c.Reason)
}

// WantsCleanupFinalizer reports whether a CSV should carry olmguard.io/cleanup: every CSV that is
// not a copy (copies own nothing), not being deleted, and not opted out.
func WantsCleanupFinalizer(c CSVView) bool {
	return !c.Copied() && !c.Deleting && c.Annotations[olmguard.CleanupAnnotation] != olmguard.CleanupDisabled
}

// WantsCleanupFinalizerOnUpdate is WantsCleanupFinalizer for an update from old to new: copy
// marks do not count when the old object was not a copy, or held olmguard's finalizer, which
// olmguard never puts on a copy. OLM marks its copies (label olm.copiedFrom, status.reason Copied,
// the operator-namespace annotation) when it creates them, never later, so marks that appear on a
// CSV olmguard guards were written by someone else, and must not take its finalizer off, in the
// same update or in a later one (issue 31 item 7).
func WantsCleanupFinalizerOnUpdate(old, new CSVView) bool {
	if (!old.Copied() || HasFinalizer(old.Finalizers)) && new.Copied() {
		return !new.Deleting && new.Annotations[olmguard.CleanupAnnotation] != olmguard.CleanupDisabled
	}
	return WantsCleanupFinalizer(new)
}

// HasFinalizer reports whether finalizers hold olmguard's cleanup finalizer.
func HasFinalizer(finalizers []string) bool {
	return slices.Contains(finalizers, olmguard.CleanupFinalizer)
}

// AddFinalizerPatch appends finalizer f unless present. It never rewrites the list, so a finalizer
// OLM adds concurrently (its full Update of the CSV) is kept.
func AddFinalizerPatch(finalizers []string, f string) []jsonpatch.Operation {
	for _, x := range finalizers {
		if x == f {
			return nil
		}
	}
	if finalizers == nil {
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/metadata/finalizers", []string{f})}
	}
	return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/metadata/finalizers/-", f)}
}

// TrackPatch labels olmguard.io/cleanup-tracked a CSV labelled olm.copiedFrom that holds
// olmguard's finalizer (finalized: before or by this write), unless it carries the label: the
// controller's cache leaves out the CSVs labelled olm.copiedFrom but those (issue 32), and a
// finalized CSV it cannot see would stay terminating when deleted.
func TrackPatch(labels map[string]string, finalized bool) []jsonpatch.Operation {
	_, copied := labels[olm.CopiedFromLabel]
	_, tracked := labels[olmguard.CleanupTrackedLabel]
	if !finalized || !copied || tracked {
		return nil
	}
	return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/metadata/labels/"+review.PointerToken(olmguard.CleanupTrackedLabel), "true")}
}

// RemoveFinalizerPatch removes finalizer f, guarded by a test of its position so the patch fails,
// rather than removing another finalizer, if the list changed in between.
func RemoveFinalizerPatch(finalizers []string, f string) []jsonpatch.Operation {
	for i, x := range finalizers {
		if x == f {
			path := "/metadata/finalizers/" + strconv.Itoa(i)
			return []jsonpatch.Operation{jsonpatch.NewOperation("test", path, f), jsonpatch.NewOperation("remove", path, nil)}
		}
	}
	return nil
}
