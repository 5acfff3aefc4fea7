package mutate

import (
	"strconv"

	"gomodules.xyz/jsonpatch/v2"
)

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
