package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Warnings collects the admission warnings a client receives.
type Warnings struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *Warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

// Take returns the warnings received so far, one a line, and forgets them.
func (w *Warnings) Take() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	all := strings.Join(w.msgs, "\n")
	w.msgs = nil
	return all
}

// WarningClient is a client of cfg whose requests' admission warnings land in the Warnings.
func WarningClient(tb testing.TB, cfg *rest.Config, scheme *runtime.Scheme) (client.Client, *Warnings) {
	tb.Helper()
	c, w, err := NewWarningClient(cfg, scheme)
	if err != nil {
		tb.Fatal(err)
	}
	return c, w
}

// NewWarningClient is WarningClient for callers without a test (the demo).
func NewWarningClient(cfg *rest.Config, scheme *runtime.Scheme) (client.Client, *Warnings, error) {
	w := &Warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	return c, w, err
}
