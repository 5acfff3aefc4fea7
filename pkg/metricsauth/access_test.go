package metricsauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// fakeReviewer knows tokens and the verb+path each user may use, and counts its reviews.
type fakeReviewer struct {
	tokens        map[string]Caller
	allowed       map[string]bool // "user verb path"
	authnErr      error
	authzErr      error
	authns, authz int
}

func (f *fakeReviewer) Authenticate(_ context.Context, token string) (Caller, bool, error) {
	f.authns++
	if f.authnErr != nil {
		return Caller{}, false, f.authnErr
	}
	c, ok := f.tokens[token]
	return c, ok, nil
}

func (f *fakeReviewer) Authorize(_ context.Context, c Caller, verb, path string) (bool, error) {
	f.authz++
	if f.authzErr != nil {
		return false, f.authzErr
	}
	return f.allowed[c.Name+" "+verb+" "+path], nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newTestGate() (*fakeReviewer, *clock, http.Handler) {
	f := &fakeReviewer{
		tokens:  map[string]Caller{"prom": {Name: "system:serviceaccount:monitoring:prometheus"}, "other": {Name: "someone"}},
		allowed: map[string]bool{"system:serviceaccount:monitoring:prometheus get /metrics": true},
	}
	c := &clock{t: time.Unix(1_800_000_000, 0)}
	h := NewAccessGate(f, c.now).Wrap(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("olmguard_metric 1\n"))
	}))
	return f, c, h
}

func call(h http.Handler, method, path, authorization string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestAccessGateAnswers(t *testing.T) {
	for _, tt := range []struct {
		name          string
		method, path  string
		authorization string
		authnErr      error
		authzErr      error
		want          int
		body          string
	}{
		{"no header", "GET", "/metrics", "", nil, nil, http.StatusUnauthorized, "bearer token is required"},
		{"basic auth", "GET", "/metrics", "Basic cHJvbTpwcm9t", nil, nil, http.StatusUnauthorized, "bearer token is required"},
		{"empty bearer", "GET", "/metrics", "Bearer ", nil, nil, http.StatusUnauthorized, "bearer token is required"},
		{"unknown token", "GET", "/metrics", "Bearer forged", nil, nil, http.StatusUnauthorized, "Unauthorized"},
		{"allowed", "GET", "/metrics", "Bearer prom", nil, nil, http.StatusOK, "olmguard_metric"},
		{"scheme in any case", "GET", "/metrics", "bearer prom", nil, nil, http.StatusOK, "olmguard_metric"},
		{"authenticated, not allowed", "GET", "/metrics", "Bearer other", nil, nil, http.StatusForbidden, `user "someone" may not get /metrics`},
		{"allowed get, not post", "POST", "/metrics", "Bearer prom", nil, nil, http.StatusForbidden, "may not post /metrics"},
		{"allowed /metrics, not another path", "GET", "/debug", "Bearer prom", nil, nil, http.StatusForbidden, "may not get /debug"},
		{"TokenReview fails", "GET", "/metrics", "Bearer prom", errors.New("connection refused"), nil, http.StatusInternalServerError, "could not be asked"},
		{"SubjectAccessReview fails", "GET", "/metrics", "Bearer prom", nil, errors.New("timeout"), http.StatusInternalServerError, "could not be asked"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f, _, h := newTestGate()
			f.authnErr, f.authzErr = tt.authnErr, tt.authzErr
			w := call(h, tt.method, tt.path, tt.authorization)
			if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("got %d %q, want %d containing %q", w.Code, w.Body.String(), tt.want, tt.body)
			}
		})
	}
}

// Answers are cached for their TTL, denials shorter than grants, and failures not at all.
func TestAccessGateCaches(t *testing.T) {
	f, c, h := newTestGate()
	for range 3 {
		if w := call(h, "GET", "/metrics", "Bearer prom"); w.Code != http.StatusOK {
			t.Fatalf("status %d", w.Code)
		}
	}
	if f.authns != 1 || f.authz != 1 {
		t.Fatalf("three scrapes asked %d TokenReviews and %d SubjectAccessReviews, want 1 and 1", f.authns, f.authz)
	}
	c.t = c.t.Add(authenticatedTTL)
	call(h, "GET", "/metrics", "Bearer prom")
	if f.authns != 2 || f.authz != 1 {
		t.Fatalf("after the token's TTL: %d TokenReviews and %d SubjectAccessReviews, want 2 and 1", f.authns, f.authz)
	}

	// A denial is kept for deniedTTL only: a permission granted afterwards takes effect then.
	if w := call(h, "GET", "/metrics", "Bearer other"); w.Code != http.StatusForbidden {
		t.Fatalf("status %d", w.Code)
	}
	f.allowed["someone get /metrics"] = true
	if w := call(h, "GET", "/metrics", "Bearer other"); w.Code != http.StatusForbidden {
		t.Fatalf("cached denial: status %d", w.Code)
	}
	c.t = c.t.Add(deniedTTL)
	if w := call(h, "GET", "/metrics", "Bearer other"); w.Code != http.StatusOK {
		t.Fatalf("after the denial's TTL: status %d, want 200", w.Code)
	}

	// A failed review is asked again on the next request.
	f.authnErr = errors.New("connection refused")
	call(h, "GET", "/metrics", "Bearer new")
	f.authnErr = nil
	f.tokens["new"] = Caller{Name: "system:serviceaccount:monitoring:prometheus"}
	if w := call(h, "GET", "/metrics", "Bearer new"); w.Code != http.StatusOK {
		t.Fatalf("after a failed TokenReview: status %d, want 200", w.Code)
	}
}

// Many different tokens cannot grow the cache past its bound.
func TestAccessGateCacheBounded(t *testing.T) {
	f, _, _ := newTestGate()
	g := NewAccessGate(f, time.Now)
	h := g.Wrap(logr.Discard(), http.NotFoundHandler())
	for i := range 3 * maxCached {
		call(h, "GET", "/metrics", fmt.Sprintf("Bearer forged-%d", i))
	}
	if n := len(g.callers); n > maxCached {
		t.Fatalf("%d tokens cached, bound %d", n, maxCached)
	}
}

// Two callers with the same name but other groups or extra are different questions.
func TestAccessKeyDistinguishesCallers(t *testing.T) {
	base := Caller{Name: "u", Groups: []string{"a", "b"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x"}}}
	same := Caller{Name: "u", Groups: []string{"b", "a"}, Extra: map[string]authenticationv1.ExtraValue{"scopes": {"x"}}}
	if accessKey(base, "get", "/metrics") != accessKey(same, "get", "/metrics") {
		t.Error("the order of groups changed the key")
	}
	for _, other := range []Caller{
		{Name: "u", Groups: []string{"a"}, Extra: base.Extra},
		{Name: "u", Groups: base.Groups},
		{Name: "u", UID: "1", Groups: base.Groups, Extra: base.Extra},
		{Name: "u", Groups: []string{"a;b"}, Extra: base.Extra},
	} {
		if accessKey(base, "get", "/metrics") == accessKey(other, "get", "/metrics") {
			t.Errorf("%+v shares a key with %+v", other, base)
		}
	}
}
