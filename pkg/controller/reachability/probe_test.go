package reachability

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/olmguard/olmguard/pkg/metrics"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// answer is how the fake kube-apiserver answers one dry run.
type answer int

const (
	called answer = iota
	notCalled
	failed
)

// TestProbeOnceTransitions: the gauge follows every probe; an Event and a log line mark each
// change only (a first failure included, a first success not).
func TestProbeOnceTransitions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		seq    []answer
		events []string // reasons, in order
		gauge  float64  // after the last probe
	}{
		{name: "called from the start", seq: []answer{called, called}, gauge: 1},
		{name: "not called from the start", seq: []answer{notCalled, notCalled}, events: []string{"Warning " + ReasonNotCalled}, gauge: 0},
		{name: "lost, then back", seq: []answer{called, notCalled, notCalled, called}, events: []string{"Warning " + ReasonNotCalled, "Normal " + ReasonCalled}, gauge: 1},
		{name: "the dry run fails", seq: []answer{called, failed}, events: []string{"Warning " + ReasonNotCalled}, gauge: 0},
		{name: "from failing to not called", seq: []answer{failed, notCalled}, events: []string{"Warning " + ReasonNotCalled, "Warning " + ReasonNotCalled}, gauge: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var next answer
			c := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{
				Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					co := &client.CreateOptions{}
					co.ApplyOptions(opts)
					if len(co.DryRun) != 1 || co.DryRun[0] != "All" {
						t.Fatalf("a create that is no dry run: %+v", co)
					}
					switch next {
					case failed:
						return errors.New("failed calling webhook")
					case called:
						obj.SetAnnotations(map[string]string{olmguard.WebhookProbeAnswerAnnotation: obj.GetLabels()[olmguard.WebhookProbeLabel]})
					}
					return nil
				},
			}).Build()
			rec := events.NewFakeRecorder(10)
			p := &Prober{Client: c, Namespace: "og", Recorder: rec}
			for _, a := range tc.seq {
				next = a
				p.ProbeOnce(context.Background(), logr.Discard())
			}
			if got := testutil.ToFloat64(metrics.WebhookReachable); got != tc.gauge {
				t.Errorf("olmguard_webhook_reachable = %v, want %v", got, tc.gauge)
			}
			close(rec.Events)
			var got []string
			for e := range rec.Events {
				got = append(got, e)
			}
			if len(got) != len(tc.events) {
				t.Fatalf("events %q, want reasons %q", got, tc.events)
			}
			for i, want := range tc.events {
				if len(got[i]) < len(want) || got[i][:len(want)] != want {
					t.Errorf("event %d = %q, want %q", i, got[i], want)
				}
			}
		})
	}
}
