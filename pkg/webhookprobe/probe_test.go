package webhookprobe

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"gomodules.xyz/jsonpatch/v2"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

func TestJudge(t *testing.T) {
	answered := map[string]string{olmguard.WebhookProbeAnswerAnnotation: "n1"}
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		err         error
		want        Outcome
	}{
		{name: "the webhook's mark", annotations: answered, want: Called},
		{name: "the mark beside other annotations", annotations: map[string]string{"a": "b", olmguard.WebhookProbeAnswerAnnotation: "n1"}, want: Called},
		{name: "no annotations: the webhook was not called", want: NotCalled},
		{name: "other annotations only", annotations: map[string]string{"a": "b"}, want: NotCalled},
		{name: "another probe's nonce", annotations: map[string]string{olmguard.WebhookProbeAnswerAnnotation: "n2"}, want: NotCalled},
		{name: "an empty answer", annotations: map[string]string{olmguard.WebhookProbeAnswerAnnotation: ""}, want: NotCalled},
		{name: "the apiserver failed the dry run", err: errors.New(`Internal error occurred: failed calling webhook "webhook-probe.mutate.olmguard.io"`), want: Failed},
		{name: "an error wins over a mark", annotations: answered, err: errors.New("forbidden"), want: Failed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Judge("n1", tc.annotations, tc.err)
			if got.Outcome != tc.want {
				t.Fatalf("Judge = %+v, want %s", got, tc.want)
			}
			if got.OK() != (tc.want == Called) || got.Message == "" {
				t.Errorf("Judge = %+v: OK or message wrong", got)
			}
			if tc.err != nil && !strings.Contains(got.Message, tc.err.Error()) {
				t.Errorf("message %q does not say the error %q", got.Message, tc.err)
			}
		})
	}
}

func TestAnswer(t *testing.T) {
	marked := map[string]string{olmguard.WebhookProbeLabel: "abc-123"}
	for _, tc := range []struct {
		name string
		r    Request
		want bool
	}{
		{name: "a marked dry run in olmguard's namespace", r: Request{Namespace: "og", Own: "og", DryRun: true, Labels: marked}, want: true},
		{name: "not a dry run: never stored with the mark's answer", r: Request{Namespace: "og", Own: "og", Labels: marked}},
		{name: "a tenant's namespace", r: Request{Namespace: "tenant", Own: "og", DryRun: true, Labels: marked}},
		{name: "no own namespace known", r: Request{Namespace: "", Own: "", DryRun: true, Labels: marked}},
		{name: "no mark", r: Request{Namespace: "og", Own: "og", DryRun: true, Labels: map[string]string{"a": "b"}}},
		{name: "an empty mark", r: Request{Namespace: "og", Own: "og", DryRun: true, Labels: map[string]string{olmguard.WebhookProbeLabel: ""}}},
		{name: "a mark that is no nonce", r: Request{Namespace: "og", Own: "og", DryRun: true, Labels: map[string]string{olmguard.WebhookProbeLabel: "A.b_c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nonce, ok := Answer(tc.r)
			if ok != tc.want || ok && nonce != tc.r.Labels[olmguard.WebhookProbeLabel] || !ok && nonce != "" {
				t.Errorf("Answer = %q, %v; want answered %v", nonce, ok, tc.want)
			}
		})
	}
}

func TestNonceIsValid(t *testing.T) {
	a, b := Nonce(), Nonce()
	if !ValidNonce(a) || a == b {
		t.Errorf("Nonce() = %q then %q: want valid and fresh", a, b)
	}
}

func TestValidNonce(t *testing.T) {
	for s, want := range map[string]bool{
		"abc-123": true, "0": true, "": false, "ABC": false, "a.b": false, "a_b": false,
		"-a": false, "a\x1b[31m": false, strings.Repeat("a", 63): true, strings.Repeat("a", 64): false,
	} {
		if got := ValidNonce(s); got != want {
			t.Errorf("ValidNonce(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestAnswerPatchThenJudge applies the webhook's patch to the probe object and judges the result,
// as the kube-apiserver would answer the dry run.
func TestAnswerPatchThenJudge(t *testing.T) {
	for _, tc := range []struct {
		name        string
		annotations map[string]string
	}{
		{name: "no annotations"},
		{name: "annotations", annotations: map[string]string{"x/y": "z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := Object("og", "n1")
			obj.Annotations = tc.annotations
			nonce, ok := Answer(Request{Namespace: obj.Namespace, Own: "og", DryRun: true, Labels: obj.Labels})
			if !ok {
				t.Fatal("the probe object is not answered")
			}
			got := applyAnnotations(t, tc.annotations, AnswerPatch(tc.annotations, nonce))
			if r := Judge("n1", got, nil); !r.OK() {
				t.Errorf("Judge after the patch = %+v", r)
			}
			for k, v := range tc.annotations {
				if got[k] != v {
					t.Errorf("annotation %s = %q, want %q kept", k, got[k], v)
				}
			}
		})
	}
}

// applyAnnotations applies add operations on /metadata/annotations as RFC 6902 does.
func applyAnnotations(t *testing.T, before map[string]string, ops []jsonpatch.Operation) map[string]string {
	t.Helper()
	out := map[string]string{}
	for k, v := range before {
		out[k] = v
	}
	for _, op := range ops {
		if op.Operation != "add" {
			t.Fatalf("op %s: only add is expected", op.Operation)
		}
		switch {
		case op.Path == "/metadata/annotations":
			if before != nil {
				t.Fatal("the patch replaces existing annotations")
			}
			b, _ := json.Marshal(op.Value)
			var m map[string]string
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			for k, v := range m {
				out[k] = v
			}
		case strings.HasPrefix(op.Path, "/metadata/annotations/"):
			key := strings.TrimPrefix(op.Path, "/metadata/annotations/")
			key = strings.ReplaceAll(strings.ReplaceAll(key, "~1", "/"), "~0", "~")
			out[key] = op.Value.(string)
		default:
			t.Fatalf("unexpected path %s", op.Path)
		}
	}
	return out
}
