// Package review decodes the objects inside AdmissionReviews the way the apiserver encodes them:
// case-sensitively (encoding/json would read "metAdAtA" as metadata) and refusing bodies with no
// metadata object, so handlers answer bad input with a clear error instead of a patch that cannot
// apply.
package review

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"
)

// Meta is the part of an object's metadata the handlers read.
type Meta struct {
	Name              string                  `json:"name"`
	GenerateName      string                  `json:"generateName"`
	Namespace         string                  `json:"namespace"`
	UID               types.UID               `json:"uid"`
	DeletionTimestamp *metav1.Time            `json:"deletionTimestamp"`
	Labels            map[string]string       `json:"labels"`
	Annotations       map[string]string       `json:"annotations"`
	Finalizers        []string                `json:"finalizers"`
	OwnerReferences   []metav1.OwnerReference `json:"ownerReferences"`
}

// GetNamespace and SetNamespace let an admission adapter fill the namespace of an object the
// apiserver sent without one.
func (m *Meta) GetNamespace() string { return m.Namespace }

// SetNamespace sets the namespace.
func (m *Meta) SetNamespace(ns string) { m.Namespace = ns }

// DecodeMeta reads only the metadata of an object; the rest of the body is skipped.
func DecodeMeta(raw []byte) (*Meta, error) {
	var o struct {
		Metadata *Meta `json:"metadata"`
	}
	if err := Decode(raw, &o); err != nil {
		return nil, err
	}
	if o.Metadata == nil {
		return nil, errors.New("object has no metadata")
	}
	return o.Metadata, nil
}

// Decode unmarshals an object case-sensitively into v.
func Decode(raw []byte, v any) error {
	if len(raw) == 0 {
		return errors.New("empty object")
	}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, v); err != nil {
		return fmt.Errorf("malformed object: %w", err)
	}
	return nil
}
