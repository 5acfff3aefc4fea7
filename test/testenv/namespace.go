package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace creates namespace name with c, a namespace of its own for one test, and returns its
// name; it fails the test if the create fails (a name another test already took, too). The
// namespace stays: envtest's apiserver runs no namespace controller that would empty it. A test
// that needs no particular name takes a FreshNamespace.
func Namespace(tb testing.TB, c client.Client, name string) string {
	tb.Helper()
	ns, err := createNamespace(context.Background(), c, metav1.ObjectMeta{Name: name})
	if err != nil {
		tb.Fatal(err)
	}
	return ns
}

// NewNamespace creates a fresh namespace with c and returns its name: prefix, a dash and a suffix
// the apiserver generates (metadata.generateName), so that no two are named alike however many
// tests, runs and tiers share the cluster. It is FreshNamespace for code that returns errors
// instead of failing a test (the real-OLM scenarios, which make demo replays too).
func NewNamespace(ctx context.Context, c client.Client, prefix string) (string, error) {
	return createNamespace(ctx, c, metav1.ObjectMeta{GenerateName: prefix + "-"})
}

func createNamespace(ctx context.Context, c client.Client, meta metav1.ObjectMeta) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: meta}
	if err := c.Create(ctx, ns); err != nil {
		return "", err
	}
	return ns.Name, nil
}

// NamespaceOption is an option of FreshNamespace.
type NamespaceOption func(*namespaceOptions)

type namespaceOptions struct {
	deleteAtEnd bool
}

// DeleteAtEnd makes FreshNamespace delete the namespace again when the test ends (one already gone
// is fine; any other failure fails the test). Only where a namespace controller empties a deleted
// namespace (kube-controller-manager: test/cluster's clusters): envtest's apiserver runs none, and
// a namespace deleted there stays Terminating.
func DeleteAtEnd() NamespaceOption {
	return func(o *namespaceOptions) { o.deleteAtEnd = true }
}

// FreshNamespace creates a namespace of its own for one test with c (NewNamespace: named prefix,
// a dash and a generated suffix) and returns its name; it fails the test if the create fails.
func FreshNamespace(tb testing.TB, c client.Client, prefix string, opts ...NamespaceOption) string {
	tb.Helper()
	var o namespaceOptions
	for _, opt := range opts {
		opt(&o)
	}
	name, err := NewNamespace(context.Background(), c, prefix)
	if err != nil {
		tb.Fatalf("creating a namespace named %s-...: %v", prefix, err)
	}
	if o.deleteAtEnd {
		tb.Cleanup(func() {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if err := c.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
				tb.Errorf("deleting namespace %s: %v", name, err)
			}
		})
	}
	return name
}
