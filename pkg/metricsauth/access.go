// Package metricsauth serves olmguard's /metrics only to callers the kube-apiserver authenticates
// and authorizes for it, as both binaries do by default (--metrics-secure). The metric names
// themselves live in pkg/metrics.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// How long the kube-apiserver's answers are trusted. A Prometheus scraping every 15 s costs one
// TokenReview a minute and one SubjectAccessReview every 5 minutes; a permission granted after a
// denial takes effect within 30 s.
const (
	authenticatedTTL   = time.Minute
	unauthenticatedTTL = 10 * time.Second
	allowedTTL         = 5 * time.Minute
	deniedTTL          = 30 * time.Second
	// maxCached bounds each cache, so that callers sending many different tokens cannot grow it.
	maxCached = 1024
	// reviewTimeout bounds one review by the kube-apiserver.
	reviewTimeout = 10 * time.Second
)

// Caller is who the kube-apiserver says a bearer token belongs to.
type Caller struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authenticationv1.ExtraValue
}

// AccessReviewer asks the kube-apiserver about a caller: who a token belongs to (TokenReview) and
// whether that caller may use a verb on a non-resource URL (SubjectAccessReview).
type AccessReviewer interface {
	Authenticate(ctx context.Context, token string) (caller Caller, ok bool, err error)
	Authorize(ctx context.Context, caller Caller, verb, path string) (allowed bool, err error)
}

// AuthorizedOnly is a metrics server FilterProvider: /metrics answers only callers whose bearer
// token the kube-apiserver authenticates and who may `get` the URL's path. It asks the apiserver
// with TokenReviews and SubjectAccessReviews itself rather than through k8s.io/apiserver's
// delegating authenticator: that package's dependencies (CEL, OpenTelemetry, the apiserver's
// feature gates) would add to each binary's memory (docs/performance.md).
func AuthorizedOnly(config *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	cs, err := kubernetes.NewForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	g := NewAccessGate(apiserverReviewer{cs}, time.Now)
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return g.Wrap(log, next), nil
	}, nil
}

// AccessGate lets through requests whose caller is authenticated and authorized, caching answers.
type AccessGate struct {
	reviewer AccessReviewer
	now      func() time.Time

	mu      sync.Mutex
	callers map[[sha256.Size]byte]cached[*Caller]
	access  map[string]cached[bool]
}

type cached[T any] struct {
	value   T
	expires time.Time
}

// NewAccessGate returns a gate asking reviewer, with now as its clock.
func NewAccessGate(reviewer AccessReviewer, now func() time.Time) *AccessGate {
	return &AccessGate{reviewer: reviewer, now: now,
		callers: map[[sha256.Size]byte]cached[*Caller]{}, access: map[string]cached[bool]{}}
}

// Wrap returns next behind the gate: 401 without a token the apiserver authenticates, 403 for a
// caller not allowed the request's verb (the method in lower case) on its path, 500 when the
// apiserver cannot be asked.
func (g *AccessGate) Wrap(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			http.Error(w, "Unauthorized: a bearer token is required", http.StatusUnauthorized)
			return
		}
		caller, err := g.authenticate(r.Context(), token)
		if err != nil {
			log.Error(err, "checking a /metrics caller's token with the kube-apiserver")
			http.Error(w, "Authentication failed: the kube-apiserver could not be asked", http.StatusInternalServerError)
			return
		}
		if caller == nil {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb, path := strings.ToLower(r.Method), r.URL.Path
		allowed, err := g.authorize(r.Context(), *caller, verb, path)
		if err != nil {
			log.Error(err, "checking a /metrics caller's access with the kube-apiserver", "user", caller.Name)
			http.Error(w, "Authorization failed: the kube-apiserver could not be asked", http.StatusInternalServerError)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", caller.Name, verb, path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearerToken is the token of an "Authorization: Bearer <token>" header.
func bearerToken(header string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(header), " ")
	token = strings.TrimSpace(token)
	if !found || !strings.EqualFold(scheme, "bearer") || token == "" {
		return "", false
	}
	return token, true
}

// authenticate returns the token's caller, or nil when the apiserver does not authenticate it.
// Tokens are kept only as hashes.
func (g *AccessGate) authenticate(ctx context.Context, token string) (*Caller, error) {
	key := sha256.Sum256([]byte(token))
	if c, ok := lookup(g, g.callers, key); ok {
		return c, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	caller, ok, err := g.reviewer.Authenticate(ctx, token)
	if err != nil {
		return nil, err // not cached: the next scrape asks again
	}
	var c *Caller
	ttl := unauthenticatedTTL
	if ok {
		c, ttl = &caller, authenticatedTTL
	}
	store(g, g.callers, key, c, ttl)
	return c, nil
}

func (g *AccessGate) authorize(ctx context.Context, c Caller, verb, path string) (bool, error) {
	key := accessKey(c, verb, path)
	if allowed, ok := lookup(g, g.access, key); ok {
		return allowed, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	allowed, err := g.reviewer.Authorize(ctx, c, verb, path)
	if err != nil {
		return false, err
	}
	ttl := deniedTTL
	if allowed {
		ttl = allowedTTL
	}
	store(g, g.access, key, allowed, ttl)
	return allowed, nil
}

// accessKey identifies a question to the authorizer: everything a SubjectAccessReview carries.
func accessKey(c Caller, verb, path string) string {
	var b strings.Builder
	for _, s := range []string{verb, path, c.Name, c.UID} {
		fmt.Fprintf(&b, "%q;", s)
	}
	groups := slices.Clone(c.Groups)
	slices.Sort(groups)
	fmt.Fprintf(&b, "%q;", groups)
	keys := make([]string, 0, len(c.Extra))
	for k := range c.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q;", k, []string(c.Extra[k]))
	}
	return b.String()
}

func lookup[K comparable, V any](g *AccessGate, m map[K]cached[V], key K) (V, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := m[key]
	if !ok || !g.now().Before(e.expires) {
		var zero V
		return zero, false
	}
	return e.value, true
}

// store caches value; when the cache is full it first drops expired entries, then, if still
// full, everything (answers are cheap to ask again; memory is not).
func store[K comparable, V any](g *AccessGate, m map[K]cached[V], key K, value V, ttl time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if len(m) >= maxCached {
		for k, e := range m {
			if !now.Before(e.expires) {
				delete(m, k)
			}
		}
		if len(m) >= maxCached {
			clear(m)
		}
	}
	m[key] = cached[V]{value: value, expires: now.Add(ttl)}
}

// apiserverReviewer asks the kube-apiserver.
type apiserverReviewer struct{ cs kubernetes.Interface }

func (a apiserverReviewer) Authenticate(ctx context.Context, token string) (Caller, bool, error) {
	tr, err := a.cs.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return Caller{}, false, fmt.Errorf("TokenReview: %w", err)
	}
	// An unauthenticated token comes back with status.error set: an answer, not a failure.
	u := tr.Status.User
	return Caller{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: u.Extra}, tr.Status.Authenticated, nil
}

// Authorize treats an evaluation error without an allow as a denial, as the apiserver's own
// authorizer chain does (a broken binding elsewhere must not turn a 403 into a 500).
func (a apiserverReviewer) Authorize(ctx context.Context, c Caller, verb, path string) (bool, error) {
	extra := make(map[string]authorizationv1.ExtraValue, len(c.Extra))
	for k, v := range c.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: c.Name, UID: c.UID, Groups: c.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: verb, Path: path}}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("SubjectAccessReview: %w", err)
	}
	return sar.Status.Allowed, nil
}
