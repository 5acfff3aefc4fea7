package admit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Decider is an admission handler not yet bound to an endpoint: For completes it with the rules
// of the webhook configuration entry that sends it requests (the admission table's), so the
// operations it answers are declared once, in the table.
type Decider interface {
	For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error)
}

// Untyped is a handler that answers every request as it comes, whatever the rules: for handlers
// that check nothing (AllowAll) and for tests that stand in for a typed one.
func Untyped(h admission.Handler) Decider { return untyped{h} }

type untyped struct{ h admission.Handler }

func (u untyped) For([]admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	return u.h, nil
}

// Object is what the adapter needs of a decoded object: its namespace, to fill it from the
// request when the object has none (the apiserver sends a CREATE's namespace only there).
type Object interface {
	GetNamespace() string
	SetNamespace(string)
}

// Request is one admission request with its objects decoded: what a typed decision reads. The
// raw bodies stay in r.Request.Object and r.Request.OldObject.
type Request[T Object] struct {
	admission.Request
	// Object is the request's object, its namespace filled from the request when empty.
	Object T
	// Old is the old object of an UPDATE (the zero T otherwise), its namespace filled the same
	// way. With Typed.OldOptional it is the zero T when unreadable, and OldErr says why.
	Old T
	// OldErr is why the old object of an UPDATE could not be read (Typed.OldOptional only): a
	// bad request, which a decision that needs the old object returns as its error.
	OldErr error
}

// Typed adapts a typed decision to admission requests. It does, once for every handler, what
// each did before its decision: requests for another kind or an operation its endpoint's rules
// do not send are admitted unchanged, the object is decoded (and an UPDATE's old object), the
// namespace filled from the request, and errors answered as errors, which Serve then turns into
// an admission with a warning (the one fail-open policy).
type Typed[T Object] struct {
	// Kind is the kind the decision judges; a request for any other is admitted unchanged, with
	// "not a <Kind>".
	Kind schema.GroupKind
	// Decode reads one object of a request. Its error is the request's: answered 400,
	// "decoding <Kind>: ..." or "decoding old <Kind>: ...".
	Decode func(raw []byte) (T, error)
	// OldOptional leaves an UPDATE's unreadable old object to the decision (Request.OldErr)
	// instead of answering 400 before it.
	OldOptional bool
	// Active, when set, is asked before decoding: false admits the request unchanged, unread
	// (every policy the decision serves is off).
	Active func() bool
	// Decide judges one request. An error is answered as an error: 400 when it is a BadRequest,
	// else 500.
	Decide func(ctx context.Context, r Request[T]) (admission.Response, error)
}

// For returns the handler of an endpoint whose webhook configuration entry sends rules. The
// rules must name an operation and the decision's API group: else the endpoint would admit every
// request unjudged.
func (t Typed[T]) For(rules []admissionregistrationv1.RuleWithOperations) (admission.Handler, error) {
	if t.Decode == nil || t.Decide == nil || t.Kind.Kind == "" {
		return nil, fmt.Errorf("typed admission of %q: a kind, a decoder and a decision are required", t.Kind)
	}
	h := typedHandler[T]{t: t, ops: map[admissionv1.Operation]bool{}}
	group := false
	for _, r := range rules {
		for _, op := range r.Operations {
			if op == admissionregistrationv1.OperationAll {
				h.all = true
			}
			h.ops[admissionv1.Operation(op)] = true
		}
		group = group || slices.Contains(r.APIGroups, t.Kind.Group) || slices.Contains(r.APIGroups, "*")
	}
	switch {
	case len(h.ops) == 0:
		return nil, fmt.Errorf("typed admission of %s: the endpoint's rules send no operation", t.Kind)
	case !group:
		return nil, fmt.Errorf("typed admission of %s: the endpoint's rules send no object of group %q", t.Kind, t.Kind.Group)
	}
	return h, nil
}

type typedHandler[T Object] struct {
	t   Typed[T]
	ops map[admissionv1.Operation]bool
	all bool
}

func (h typedHandler[T]) Handle(ctx context.Context, req admission.Request) admission.Response {
	t := h.t
	if req.Kind.Kind != t.Kind.Kind || req.Kind.Group != t.Kind.Group {
		return admission.Allowed("not " + article(t.Kind.Kind) + " " + t.Kind.Kind)
	}
	if !h.all && !h.ops[req.Operation] || t.Active != nil && !t.Active() {
		return admission.Allowed("")
	}
	r := Request[T]{Request: req}
	var err error
	if r.Object, err = t.decode(req.Object.Raw, req.Namespace, ""); err != nil {
		return errored(err)
	}
	if req.Operation == admissionv1.Update {
		if r.Old, err = t.decode(req.OldObject.Raw, req.Namespace, "old "); err != nil {
			if !t.OldOptional {
				return errored(err)
			}
			var zero T
			r.Old, r.OldErr = zero, err
		}
	}
	resp, err := t.Decide(ctx, r)
	if err != nil {
		return errored(err)
	}
	return resp
}

// decode reads raw, filling the namespace from the request's when the object has none.
func (t Typed[T]) decode(raw []byte, namespace, which string) (T, error) {
	obj, err := t.Decode(raw)
	if err != nil {
		var zero T
		return zero, BadRequest(fmt.Errorf("decoding %s%s: %w", which, t.Kind.Kind, err))
	}
	if obj.GetNamespace() == "" {
		obj.SetNamespace(namespace)
	}
	return obj, nil
}

// BadRequest marks err as the request's fault: a typed decision's error answered 400, not 500.
func BadRequest(err error) error { return badRequest{err} }

type badRequest struct{ error }

func (b badRequest) Unwrap() error { return b.error }

// errored answers err as an error response: 400 for a BadRequest, else 500.
func errored(err error) admission.Response {
	code := int32(http.StatusInternalServerError)
	if errors.As(err, new(badRequest)) {
		code = http.StatusBadRequest
	}
	return admission.Errored(code, err)
}

// article is the indefinite article of an English noun, as the kinds olmguard judges need it.
func article(noun string) string {
	if noun != "" && strings.ContainsRune("AEIOUaeiou", rune(noun[0])) {
		return "an"
	}
	return "a"
}
