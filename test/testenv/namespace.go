package testenv

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Namespace creates namespace name with c, a namespace of its own for one test, and returns its
// name; it fails the test if the create fails (a name another test already took, too). The
// namespace stays: envtest's apiserver runs no namespace controller that would empty it.
func Namespace(tb testing.TB, c client.Client, name string) string {
	tb.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		tb.Fatal(err)
	}
	return name
}
