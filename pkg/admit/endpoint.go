package admit

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/admit/registration"
)

// HandlerFactory builds the decision of one admission path once the manager exists, so a
// handler can read through the manager's clients. The endpoint's rules complete it (Build).
type HandlerFactory func(mgr manager.Manager) (Decider, error)

// Static wraps a decision that needs nothing from the manager.
func Static(d Decider) HandlerFactory {
	return func(manager.Manager) (Decider, error) { return d, nil }
}

// AllowAll admits every request unchanged.
var AllowAll = Untyped(admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
}))

// Endpoint is one admission path, declared once: the webhook configuration entry the apiserver
// calls it through (which holds the path) and the handler that answers it.
type Endpoint struct {
	registration.Webhook
	Handler HandlerFactory
}

// Build returns the handler of e: its decision, built for mgr, bound to the rules of its webhook
// configuration entry.
func (e Endpoint) Build(mgr manager.Manager) (admission.Handler, error) {
	d, err := e.Handler(mgr)
	if err != nil {
		return nil, err
	}
	return d.For(e.Rules)
}

// Webhooks returns the configuration entries of endpoints, in order.
func Webhooks(endpoints []Endpoint) []registration.Webhook {
	out := make([]registration.Webhook, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.Webhook
	}
	return out
}

// Paths returns the paths of endpoints, in order.
func Paths(endpoints []Endpoint) []string {
	out := make([]string, len(endpoints))
	for i, e := range endpoints {
		out[i] = e.Path
	}
	return out
}
