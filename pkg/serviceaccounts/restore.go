// Package serviceaccounts holds the knowledge behind olmguard's answer to OLM issue #3607: when
// catalog-operator executes an InstallPlan step of kind ServiceAccount on a ServiceAccount that
// already exists (every upgrade does: the new CSV's ownerReference is added), it patches the live
// ServiceAccount into the step's manifest with a two-way strategic merge patch. Before OLM v0.33
// (fix #3610; OpenShift before 4.20) that removes every annotation a user put on the operator's
// ServiceAccount; v0.46.0 still removes its extra labels, imagePullSecrets and
// automountServiceAccountToken. Cloud identity bindings such as EKS IRSA's
// eks.amazonaws.com/role-arn go with them and the operator breaks after the upgrade.
//
// RestorePatch decides, from the old and the new ServiceAccount of such an update, the JSON patch
// that puts back what OLM's write dropped. It is pure: the mutating webhook calls it for updates
// made by OLM's own identity only (IsOLMUser), when it is OLM's InstallPlan step (StepWrite).
package serviceaccounts

import (
	"slices"
	"sort"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/review"
)

// Limits on what one restore puts back. The old object was admitted by the apiserver (at most
// 256 KiB of annotations, valid label keys and values), but its size is still a tenant's choice:
// past a limit the restore stops, in sorted key order, and says so (Restore.Capped).
const (
	// MaxKeys is how many annotations, and how many labels, one restore puts back.
	MaxKeys = 64
	// MaxAnnotationBytes is how many bytes of annotation keys and values one restore puts back.
	MaxAnnotationBytes = 64 << 10
	// MaxPullSecrets is how many imagePullSecrets one restore puts back.
	MaxPullSecrets = 32
)

// View is what the restore reads of a ServiceAccount.
type View struct {
	Labels          map[string]string
	Annotations     map[string]string
	OwnerReferences []metav1.OwnerReference
	// ImagePullSecrets are the ServiceAccount's imagePullSecrets, in order.
	ImagePullSecrets []corev1.LocalObjectReference
	// AutomountToken is automountServiceAccountToken (nil: unset).
	AutomountToken *bool
}

// Restore is what RestorePatch puts back.
type Restore struct {
	// Patch is the JSON patch; empty when nothing is missing.
	Patch []jsonpatch.Operation
	// Annotations, Labels and PullSecrets are the keys and names put back, sorted (the
	// annotations' and labels' keys) or in the old object's order (the pull secrets).
	Annotations, Labels, PullSecrets []string
	// Automount is true when automountServiceAccountToken is put back.
	Automount bool
	// Capped is true when more was missing than the limits allow: the rest stays dropped.
	Capped bool
}

// Empty reports whether nothing is put back.
func (r Restore) Empty() bool { return len(r.Patch) == 0 }

// IsOLMUser reports whether username, the requester of an admission request, is OLM's identity:
// one of users (the webhook's --olm-users, OLM's ServiceAccount in the namespaces it is
// installed in). Only OLM's writes are corrected: whoever else removes a key means it.
func IsOLMUser(username string, users []string) bool {
	return username != "" && slices.Contains(users, username)
}

// DefaultOLMUsers are OLM's identities where OLM's manifests install it (olm.InstallNamespaces).
func DefaultOLMUsers() []string {
	out := make([]string, len(olm.InstallNamespaces))
	for i, ns := range olm.InstallNamespaces {
		out[i] = olm.ServiceAccountUser(ns)
	}
	return out
}

// StepWrite reports whether an update from old to new is OLM's InstallPlan step writing an
// operator's ServiceAccount: its desired ServiceAccount always carries a non-controller
// ownerReference to the CSV whose permissions need it (OLM merges it into the live one), so new is
// owned by a ClusterServiceVersion of OLM's API group. The label olm.managed=true alone is not
// enough: OLM also labels the ServiceAccounts of catalog pods, whose imagePullSecrets it derives
// from the CatalogSource's spec.secrets, and a secret removed there must stay removed.
func StepWrite(old, new View) bool {
	for _, r := range new.OwnerReferences {
		if r.Kind == olm.ClusterServiceVersionKind && r.APIVersion == olm.V1alpha1APIVersion {
			return true
		}
	}
	return false
}

// OLMOwnedKey reports whether OLM owns a label or annotation key: olm.* and operators.coreos.com/*
// (olm-facts §7 rule 2). The restore never puts such a key back: what OLM drops from its own keys
// it drops on purpose.
func OLMOwnedKey(key string) bool {
	return strings.HasPrefix(key, "olm.") || strings.HasPrefix(key, olm.ComponentLabelPrefix)
}

// RestorePatch returns the JSON patch that puts back on new what old carried and new lacks: the
// annotations and labels whose keys new does not have (never a key new sets, whatever its value;
// never a key OLM owns), the imagePullSecrets new does not name, and automountServiceAccountToken
// when new leaves it unset. It only adds: nothing new carries is changed or removed. Applied to new,
// a second call with the same old returns an empty patch.
func RestorePatch(old, new View) Restore {
	var r Restore
	var capped bool
	r.Annotations, capped = missingKeys(old.Annotations, new.Annotations, MaxAnnotationBytes)
	r.Capped = r.Capped || capped
	r.Patch = append(r.Patch, mapPatch("/metadata/annotations", new.Annotations, old.Annotations, r.Annotations)...)
	r.Labels, capped = missingKeys(old.Labels, new.Labels, -1)
	r.Capped = r.Capped || capped
	r.Patch = append(r.Patch, mapPatch("/metadata/labels", new.Labels, old.Labels, r.Labels)...)

	have := make(map[string]bool, len(new.ImagePullSecrets))
	for _, s := range new.ImagePullSecrets {
		have[s.Name] = true
	}
	var add []corev1.LocalObjectReference
	for _, s := range old.ImagePullSecrets {
		if s.Name == "" || have[s.Name] {
			continue
		}
		if len(add) == MaxPullSecrets {
			r.Capped = true
			break
		}
		have[s.Name] = true
		add = append(add, corev1.LocalObjectReference{Name: s.Name})
		r.PullSecrets = append(r.PullSecrets, s.Name)
	}
	switch {
	case len(add) == 0:
	case len(new.ImagePullSecrets) == 0:
		r.Patch = append(r.Patch, jsonpatch.NewOperation("add", "/imagePullSecrets", add))
	default:
		for _, s := range add {
			r.Patch = append(r.Patch, jsonpatch.NewOperation("add", "/imagePullSecrets/-", s))
		}
	}

	if old.AutomountToken != nil && new.AutomountToken == nil {
		r.Automount = true
		r.Patch = append(r.Patch, jsonpatch.NewOperation("add", "/automountServiceAccountToken", *old.AutomountToken))
	}
	return r
}

// missingKeys returns the keys of old that new lacks and OLM does not own, sorted, at most MaxKeys
// and (maxBytes >= 0) at most maxBytes of keys and values together; capped when some were left.
func missingKeys(old, new map[string]string, maxBytes int) (keys []string, capped bool) {
	for k := range old {
		if _, ok := new[k]; ok || OLMOwnedKey(k) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	size := 0
	for i, k := range keys {
		size += len(k) + len(old[k])
		if i == MaxKeys || maxBytes >= 0 && size > maxBytes {
			return keys[:i], true
		}
	}
	return keys, false
}

// mapPatch adds keys (with old's values) to the map at path, which holds have: one operation for
// the whole map when the map is empty or missing (an empty map is not serialised, so the object may
// have no map to add a key to), else one per key, so that no key new holds is ever replaced.
func mapPatch(path string, have, old map[string]string, keys []string) []jsonpatch.Operation {
	if len(keys) == 0 {
		return nil
	}
	if len(have) == 0 {
		m := make(map[string]string, len(keys))
		for _, k := range keys {
			m[k] = old[k]
		}
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", path, m)}
	}
	ops := make([]jsonpatch.Operation, len(keys))
	for i, k := range keys {
		ops[i] = jsonpatch.NewOperation("add", path+"/"+review.PointerToken(k), old[k])
	}
	return ops
}
