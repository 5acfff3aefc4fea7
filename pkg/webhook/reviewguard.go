package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/olmguard/olmguard/pkg/review"
)

// maxReviewBytes is controller-runtime's limit on an admission body (7 MiB: two objects of the
// apiserver's 3 MiB and the rest of the review). A body that reaches it is left to
// controller-runtime, which answers "request entity is too large".
const maxReviewBytes = 7 << 20

// bodyReadTimeout bounds reading a review's body. The apiserver sends a whole body at once and
// gives up on a webhook after at most 30 s; a client that stalls in the middle of a body would
// otherwise hold its connection and a goroutine for as long as it likes.
var bodyReadTimeout = 10 * time.Second

// reviewGuard wraps every admission path. controller-runtime decodes a body of any apiVersion and
// kind as an admission.k8s.io/v1 AdmissionReview and echoes them in its answer, and it hands a
// review without a request to the handler as an empty request: a body of kind Pod or of apiVersion
// admission.k8s.io/v2 was answered like a v1 review (a CSV in it even patched), and a review with
// no request was allowed as "not an InstallPlan". The apiserver always sends a JSON
// admission.k8s.io/v1 (or v1beta1) AdmissionReview whose request has a uid, a kind and an
// operation; anything else now gets a clear 400 error. Empty bodies, bodies that are too large and
// bodies that are not typed application/json are passed on: controller-runtime refuses them with
// a clear message of its own. The cost is one copy of the body and a scan of its structure (the
// objects' strings are skipped, not decoded).
func reviewGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.Header.Get("Content-Type") != "application/json" {
			next.ServeHTTP(w, r)
			return
		}
		// Not supported only behind a writer that hides net/http's (none in olmguard's server).
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
		head, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes))
		if err != nil {
			// Answered here: net/http reports a body cut short (the client ended the stream before
			// its Content-Length) once, and controller-runtime, reading again, would take what
			// arrived for the whole body and decode it.
			refuse(w, r, fmt.Errorf("reading the request body: %w", err))
			return
		}
		// controller-runtime reads the body again (what was read, then the rest) from a shallow
		// copy of the request: net/http still sees its own body afterwards, and closes the
		// connection when much of it was left unread instead of reading the rest as a request.
		r2 := r.WithContext(r.Context())
		r2.Body = readCloser{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		if len(head) >= maxReviewBytes {
			next.ServeHTTP(w, r2) // it answers "request entity is too large"
			return
		}
		if err := checkReview(head); err != nil {
			refuse(w, r, fmt.Errorf("malformed AdmissionReview: %w", err))
			return
		}
		next.ServeHTTP(w, r2)
	})
}

// refuse answers a request with a 400 error, as controller-runtime answers what it cannot decode.
func refuse(w http.ResponseWriter, r *http.Request, err error) {
	log(r.Context()).Error(err, "refusing an admission request", "path", r.URL.Path)
	resp := admission.Errored(http.StatusBadRequest, err)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta, Response: &resp.AdmissionResponse})
}

var reviewTypeMeta = metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"}

type readCloser struct {
	io.Reader
	io.Closer
}

// checkReview reports what makes body other than an AdmissionReview the apiserver would send. Only
// the members it names are read; the objects inside are skipped (controller-runtime decodes them).
func checkReview(body []byte) error {
	top, err := review.Fields(body, "apiVersion", "kind", "request")
	if err != nil {
		return err // "malformed object: not a JSON object", "... unterminated string", ...
	}
	apiVersion, kind := jsonString(top["apiVersion"]), jsonString(top["kind"])
	if kind != "AdmissionReview" || (apiVersion != "admission.k8s.io/v1" && apiVersion != "admission.k8s.io/v1beta1") {
		return fmt.Errorf("apiVersion %q and kind %q, want an AdmissionReview of admission.k8s.io/v1 (or v1beta1)", apiVersion, kind)
	}
	req, ok := top["request"]
	if !ok || string(req) == "null" {
		return errors.New("no request")
	}
	fields, err := review.Fields(req, "uid", "kind", "operation")
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	var missing []string
	for _, f := range []string{"uid", "kind", "operation"} {
		if v := string(fields[f]); v == "" || v == "null" || v == `""` || v == "{}" {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("request has no %s", strings.Join(missing, ", "))
	}
	return nil
}

// jsonString is the string a raw JSON value holds, or "" for anything else.
func jsonString(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}
