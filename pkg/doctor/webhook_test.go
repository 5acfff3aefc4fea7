package doctor

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/olmguard/olmguard/internal/shellquote"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/webhookprobe"
)

func TestWebhookProbeFindings(t *testing.T) {
	cm := schema.GroupResource{Resource: "configmaps"}
	answered := map[string]string{olmguard.WebhookProbeAnswerAnnotation: "n"}
	for _, tc := range []struct {
		name          string
		annotations   map[string]string
		err           error
		finding, skip bool
	}{
		{name: "called", annotations: answered},
		{name: "not called: failed open", finding: true},
		{name: "the dry run failed (failurePolicy Fail, unreachable)", err: apierrors.NewInternalError(errors.New(`failed calling webhook "webhook-probe.mutate.olmguard.io": connection refused`)), finding: true},
		{name: "no right to dry-run", err: apierrors.NewForbidden(cm, "", errors.New("no create")), skip: true},
		{name: "olmguard not installed there", err: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "olmguard-system"), skip: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, skipped := WebhookProbeFindings("olmguard-system", webhookprobe.Judge("n", tc.annotations, tc.err), tc.err)
			if (len(fs) == 1) != tc.finding || len(fs) > 1 || (len(skipped) == 1) != tc.skip {
				t.Fatalf("findings %+v, skipped %q; want finding %v, skip %v", fs, skipped, tc.finding, tc.skip)
			}
			if !tc.finding {
				return
			}
			f := fs[0]
			if f.Class != Webhook || f.Check != WebhookNotCalledCheck || f.Name != olmguard.MutatingWebhookConfigurationName || f.Evidence == "" || f.Fix == "" {
				t.Errorf("finding %+v", f)
			}
			if tc.err != nil && !strings.Contains(f.Evidence, "connection refused") {
				t.Errorf("evidence %q does not quote the apiserver's error", f.Evidence)
			}
			if len(f.Commands) != 3 {
				t.Fatalf("commands %q, want 3", f.Commands)
			}
			for _, c := range f.Commands {
				if words, err := shellquote.Split(c); err != nil || len(words) < 3 || words[0] != "kubectl" {
					t.Errorf("command %q: %v %q", c, err, words)
				}
			}
		})
	}
}
