package webhook

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

type ctxKey struct{}

// A review in flight when the server is told to stop keeps a live context: its lookups still run.
func TestDrainReviewOutlivesStop(t *testing.T) {
	d := &drainer{}
	base, stop := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "request values"))
	var errInHandler error
	var value any
	h := d.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stop() // the manager stops while the review is being answered
		errInHandler, value = r.Context().Err(), r.Context().Value(ctxKey{})
	}))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mutate", nil).WithContext(base))
	if errInHandler != nil {
		t.Errorf("the review's context ended with the server: %v", errInHandler)
	}
	if value != "request values" {
		t.Errorf("the review's context lost its values: %v", value)
	}
}

// After the stop, answers close their connections, and the server stops only once the drain is over.
func TestDrainClosesConnectionsBeforeStopping(t *testing.T) {
	end := make(chan time.Time)
	d := &drainer{after: func(time.Duration) <-chan time.Time { return end }}
	parent, stop := context.WithCancel(context.Background())
	serving := d.delayStop(parent, time.Minute)
	h := d.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	answer := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", nil))
		return rec.Header().Get("Connection")
	}
	if got := answer(); got != "" {
		t.Errorf("before the stop: Connection %q, want the connection kept alive", got)
	}
	stop()
	for !d.draining.Load() {
		time.Sleep(time.Millisecond)
	}
	if got := answer(); got != "close" {
		t.Errorf("while draining: Connection %q, want close", got)
	}
	if serving.Err() != nil {
		t.Fatal("the server stopped before its drain was over")
	}
	close(end)
	<-serving.Done()
}

// With no drain the server stops with its context.
func TestDrainZero(t *testing.T) {
	d := &drainer{after: func(time.Duration) <-chan time.Time { t.Error("waited with no drain"); return nil }}
	parent, stop := context.WithCancel(context.Background())
	serving := d.delayStop(parent, 0)
	stop()
	<-serving.Done()
}
