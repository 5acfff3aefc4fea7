package webhook

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/test/testenv"
)

// Reviews of another apiVersion or kind, or without a request, are refused before the handler
// runs; what controller-runtime refuses itself keeps its own message; good reviews are handled.
func TestReviewGuard(t *testing.T) {
	const good = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"metadata":{"name":"p"}}}}`
	for name, tc := range map[string]struct {
		body, contentType string
		cutShort          bool   // reading the body fails after body, as net/http's does when the client ends early
		handled           bool   // the handler ran (and answered allowed with the request's uid)
		message           string // in the error answer otherwise
	}{
		"v1":                 {body: good, handled: true},
		"v1beta1":            {body: strings.Replace(good, "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), handled: true},
		"apiVersion v2":      {body: strings.Replace(good, "admission.k8s.io/v1", "admission.k8s.io/v2", 1), message: `malformed AdmissionReview: apiVersion "admission.k8s.io/v2" and kind "AdmissionReview"`},
		"kind Pod":           {body: strings.Replace(good, `"kind":"AdmissionReview"`, `"kind":"Pod"`, 1), message: `apiVersion "admission.k8s.io/v1" and kind "Pod"`},
		"no apiVersion/kind": {body: `{"request":{"uid":"u1","kind":{"kind":"Pod"},"operation":"CREATE"}}`, message: `apiVersion "" and kind ""`},
		"kind not a string":  {body: strings.Replace(good, `"kind":"AdmissionReview"`, `"kind":7`, 1), message: `kind ""`},
		"no request":         {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, message: "malformed AdmissionReview: no request"},
		"null request":       {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`, message: "malformed AdmissionReview: no request"},
		"request a string":   {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}`, message: "request: malformed object: not a JSON object"},
		"empty request":      {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, message: "request has no uid, kind, operation"},
		"no uid":             {body: strings.Replace(good, `"uid":"u1",`, "", 1), message: "request has no uid"},
		"YAML":               {body: "apiVersion: admission.k8s.io/v2\nkind: AdmissionReview\n", message: "malformed AdmissionReview: malformed object: not a JSON object"},
		"truncated":          {body: good[:len(good)/2], message: "unterminated string"},
		"cut short":          {body: good, cutShort: true, message: "reading the request body: unexpected EOF"},
		// Left to controller-runtime.
		"empty":        {body: "", message: "request body is empty"},
		"content type": {body: good, contentType: "text/plain", message: "contentType=text/plain, expected application/json"},
		"too large":    {body: good[:len(good)-1] + `,"pad":"` + strings.Repeat("x", maxReviewBytes) + `"}`, message: "request entity is too large"},
	} {
		t.Run(name, func(t *testing.T) {
			handled := false
			h := reviewGuard(&admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
				handled = true
				return admission.Allowed("handled")
			})})
			req := httptest.NewRequest(http.MethodPost, "/mutate/x", bytes.NewReader([]byte(tc.body)))
			if tc.body == "" {
				req.Body = http.NoBody
			}
			if tc.cutShort {
				req.Body = io.NopCloser(&cutShortReader{r: strings.NewReader(tc.body)})
			}
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			var ar admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &ar); err != nil || ar.Response == nil || ar.Response.Result == nil {
				t.Fatalf("answer %d %q is not an AdmissionReview with a result: %v", rec.Code, rec.Body, err)
			}
			if rec.Code != http.StatusOK || handled != tc.handled {
				t.Fatalf("HTTP %d, handled %v, want 200 and handled %v: %s", rec.Code, handled, tc.handled, rec.Body)
			}
			r := ar.Response
			if tc.handled {
				if !r.Allowed || r.UID != "u1" || r.Result.Message != "handled" {
					t.Errorf("answer %s, want the handler's", rec.Body)
				}
				return
			}
			if r.Allowed || r.Result.Code != http.StatusBadRequest && r.Result.Code != http.StatusRequestEntityTooLarge || !strings.Contains(r.Result.Message, tc.message) {
				t.Errorf("answer %s, want a 400 or 413 error containing %q", rec.Body, tc.message)
			}
		})
	}
}

// cutShortReader returns its data, then io.ErrUnexpectedEOF once, then io.EOF: net/http's request
// body when the client ends the stream before the announced Content-Length.
type cutShortReader struct {
	r      io.Reader
	failed bool
}

func (c *cutShortReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if err == io.EOF && !c.failed {
		c.failed = true
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}

// After a body above the limit, the connection is closed rather than its unread rest being parsed
// as the next request: the next request on the client's keep-alive connection is answered.
func TestReviewGuardOversizedBodyKeepsConnectionsSane(t *testing.T) {
	srv := httptest.NewServer(reviewGuard(&admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("handled")
	})}))
	defer srv.Close()
	const good = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","object":{"metadata":{"name":"p"}}}}`
	big := good[:len(good)-1] + `,"pad":"` + strings.Repeat("x", maxReviewBytes+1<<20) + `"}`
	for i, body := range []string{big, good, big, good} {
		resp, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		var ar admissionv1.AdmissionReview
		if err != nil || json.Unmarshal(raw, &ar) != nil || ar.Response == nil || ar.Response.Result == nil {
			t.Fatalf("request %d: answer %d %.200q is not an AdmissionReview: %v", i, resp.StatusCode, raw, err)
		}
		want := "handled"
		if len(body) > maxReviewBytes {
			want = "request entity is too large"
		}
		if !strings.Contains(ar.Response.Result.Message, want) {
			t.Errorf("request %d: message %q, want %q", i, ar.Response.Result.Message, want)
		}
	}
}

// FuzzReviewGuard: any body gets an HTTP 200 AdmissionReview with a response, never a panic; the
// handler runs only for a request with a uid, and its answer carries that uid.
func FuzzReviewGuard(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","kind":{"kind":"Job"},"operation":"CREATE","object":{}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","kind":{},"operation":"DELETE"}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`))
	f.Add([]byte(`[{"request":{"uid":1}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var seen admission.Request
		handled := false
		h := reviewGuard(&admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
			handled, seen = true, req
			return admission.Allowed("handled")
		})})
		req := httptest.NewRequest(http.MethodPost, "/mutate/x", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var ar admissionv1.AdmissionReview
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &ar) != nil || ar.Response == nil {
			t.Fatalf("answer %d %q is not an AdmissionReview with a response", rec.Code, rec.Body)
		}
		if handled && (seen.UID == "" || ar.Response.UID != seen.UID) {
			t.Fatalf("handled a request with uid %q, answered uid %q", seen.UID, ar.Response.UID)
		}
		if !handled && (ar.Response.Allowed || ar.Response.Result == nil || ar.Response.Result.Message == "") {
			t.Fatalf("refused without a clear error: %s", rec.Body)
		}
	})
}

// A client that stalls in the middle of a body gets an error answer once bodyReadTimeout passes,
// instead of holding the connection for as long as it likes.
func TestReviewGuardStalledBodyTimesOut(t *testing.T) {
	defer func(d time.Duration) { bodyReadTimeout = d }(bodyReadTimeout)
	bodyReadTimeout = 200 * time.Millisecond
	srv := httptest.NewServer(reviewGuard(&admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
		return admission.Allowed("handled")
	})}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1"`
	fmt.Fprintf(conn, "POST /mutate/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body)+100, body)
	// The client now stalls: the server's guard answers; the deadline only turns a hang into a failure.
	if err := conn.SetReadDeadline(time.Now().Add(testenv.Patience)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(raw), "reading the request body") || !strings.Contains(string(raw), "timeout") {
		t.Errorf("answer %d %s, want a body read timeout", resp.StatusCode, raw)
	}
}
