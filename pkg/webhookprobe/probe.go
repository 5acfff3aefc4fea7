// Package webhookprobe knows how olmguard proves that the kube-apiserver calls its webhook.
//
// Every webhook fails open (failurePolicy Ignore): when the kube-apiserver cannot reach the
// webhook (a NetworkPolicy, a firewall rule for the webhook port, a CNI the control plane is not
// part of, a wrong Service or CA bundle), every admission goes through unchanged and nothing
// else notices, while Prometheus may still scrape the webhook's pods. The probe takes the path the
// kube-apiserver takes: a server-side dry run (dryRun=All: nothing is stored) of the creation of a
// ConfigMap marked with WebhookProbeLabel in olmguard's own namespace. olmguard's mutating
// webhook configuration sends exactly such dry runs, and only there, to /mutate/webhook-probe,
// which echoes the mark's nonce in WebhookProbeAnswerAnnotation. The answer shows the annotation
// only when the kube-apiserver called the webhook.
//
// The controller's webhook-probe reconciler and `kubectl olmguard doctor` both create the object
// with Object and judge the answer with Judge; the webhook decides with Answer and AnswerPatch.
package webhookprobe

import (
	"crypto/rand"
	"encoding/hex"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/review"
)

// GenerateName prefixes the probe object's name (the apiserver completes it, dry run or not).
const GenerateName = "olmguard-webhook-probe-"

// Object returns the ConfigMap a probe creates with dryRun=All in olmguard's namespace, marked
// with nonce (ValidNonce), which the webhook echoes.
func Object(namespace, nonce string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: GenerateName,
			Namespace:    namespace,
			Labels: map[string]string{
				olmguard.WebhookProbeLabel: nonce,
				olmguard.NameLabel:         olmguard.Name,
			},
		},
	}
}

// Nonce returns a fresh probe mark: 16 lower-case hex digits.
func Nonce() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ValidNonce reports whether s can mark a probe: a non-empty label value of lower-case letters,
// digits and dashes. The webhook echoes nothing else.
func ValidNonce(s string) bool {
	if s == "" || len(validation.IsValidLabelValue(s)) > 0 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
}

// Request is what the webhook knows of an admitted ConfigMap creation.
type Request struct {
	// Namespace is the object's; Own is olmguard's (the webhook's --namespace).
	Namespace, Own string
	DryRun         bool
	Labels         map[string]string
}

// Answer returns the nonce the webhook echoes for r, and whether it answers at all: only a dry
// run, of an object marked with a valid nonce, in olmguard's own namespace. The webhook
// configuration sends nothing else; the handler checks again, so that no object a tenant writes
// elsewhere is ever changed by the probe's path.
func Answer(r Request) (string, bool) {
	nonce, marked := r.Labels[olmguard.WebhookProbeLabel]
	if !r.DryRun || r.Own == "" || r.Namespace != r.Own || !marked || !ValidNonce(nonce) {
		return "", false
	}
	return nonce, true
}

// AnswerPatch adds WebhookProbeAnswerAnnotation with nonce to an object whose annotations are
// annotations, appending only; nothing when the object carries that answer already.
func AnswerPatch(annotations map[string]string, nonce string) []jsonpatch.Operation {
	if got, ok := annotations[olmguard.WebhookProbeAnswerAnnotation]; ok && got == nonce {
		return nil
	}
	if annotations == nil {
		return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{olmguard.WebhookProbeAnswerAnnotation: nonce})}
	}
	return []jsonpatch.Operation{jsonpatch.NewOperation("add", "/metadata/annotations/"+review.PointerToken(olmguard.WebhookProbeAnswerAnnotation), nonce)}
}

// Outcome is what one probe found.
type Outcome string

const (
	// Called: the answer carries the webhook's mark; the kube-apiserver reaches the webhook.
	Called Outcome = "Called"
	// NotCalled: the dry run succeeded but the answer lacks the mark: the kube-apiserver did not
	// call the webhook, or ignored its failure (failurePolicy Ignore), so every admission goes
	// through unguarded.
	NotCalled Outcome = "NotCalled"
	// Failed: the kube-apiserver refused or failed the dry run (with failurePolicy Fail, a webhook
	// it cannot reach fails the request): the probe cannot tell the webhook is called.
	Failed Outcome = "Failed"
)

// Result is the judgement of one probe.
type Result struct {
	Outcome Outcome
	// Message says what was seen, for logs, Events and doctor. It never holds anything a tenant
	// wrote: the probe object is olmguard's, in olmguard's namespace.
	Message string
}

// OK reports whether the webhook was called.
func (r Result) OK() bool { return r.Outcome == Called }

// Judge decides whether the dry run's answer shows the webhook's mutation: annotations are those
// of the object the kube-apiserver returned, err the dry run's error, nonce the mark sent.
func Judge(nonce string, annotations map[string]string, err error) Result {
	switch got, ok := annotations[olmguard.WebhookProbeAnswerAnnotation]; {
	case err != nil:
		return Result{Outcome: Failed, Message: "the dry-run create of the probe ConfigMap failed: " + err.Error()}
	case !ok:
		return Result{Outcome: NotCalled, Message: "the kube-apiserver answered the dry-run create of the probe ConfigMap without olmguard's mutation: it did not call the webhook (failurePolicy Ignore hides the failure), so admissions go through unguarded"}
	case got != nonce:
		return Result{Outcome: NotCalled, Message: "the probe ConfigMap came back with another probe's answer, not this one's: the webhook's mutation was not seen"}
	}
	return Result{Outcome: Called, Message: "the kube-apiserver called olmguard's mutating webhook"}
}
