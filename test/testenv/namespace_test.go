package testenv

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// FreshNamespace names each namespace from its prefix, never two alike, and deletes it at the
// test's end only with DeleteAtEnd.
func TestFreshNamespace(t *testing.T) {
	c := fake.NewClientBuilder().Build()
	var kept, deleted string
	t.Run("create", func(t *testing.T) {
		kept = FreshNamespace(t, c, "fresh")
		deleted = FreshNamespace(t, c, "fresh", DeleteAtEnd())
	})
	if kept == deleted || !strings.HasPrefix(kept, "fresh-") || !strings.HasPrefix(deleted, "fresh-") {
		t.Errorf("names %q and %q: want two different names, each fresh-<suffix>", kept, deleted)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: kept}, &corev1.Namespace{}); err != nil {
		t.Errorf("namespace %s without DeleteAtEnd: %v, want it kept", kept, err)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: deleted}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s with DeleteAtEnd: %v after the test, want NotFound", deleted, err)
	}
}
