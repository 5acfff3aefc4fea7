package testenv

import "net/http"

// RoundTripFunc is a function as an http.RoundTripper: a rest.Config's Wrap turns a test's
// function into a transport that sees, delays or answers the client's requests.
type RoundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f RoundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
