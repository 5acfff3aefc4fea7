package reachability

import (
	"context"
	"errors"
	"testing"
	"time"

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

// probeAt is one probe: the answer, and the time since the first probe.
type probeAt struct {
	answer
	at time.Duration
}

// TestProbeOnceTransitions: the gauge follows every probe; an Event and a log line mark each
// change only (a first failure included, a first success not). Until a probe has seen the webhook
// called, a failure is recorded only StartupGrace after the first probe: the rows "starting" fail
// without the grace (a Warning, then a Normal WebhookCalledAgain, on every fresh install).
func TestProbeOnceTransitions(t *testing.T) {
	const late = StartupGrace
	for _, tc := range []struct {
		name   string
		seq    []probeAt
		events []string // reasons, in order
		gauge  float64  // after the last probe
	}{
		{name: "called from the start", seq: []probeAt{{called, 0}, {called, time.Minute}}, gauge: 1},
		{name: "starting: not called, then called within the grace", seq: []probeAt{{notCalled, 0}, {failed, 30 * time.Second}, {called, time.Minute}}, gauge: 1},
		{name: "starting: not called within the grace", seq: []probeAt{{notCalled, 0}, {notCalled, time.Minute}}, gauge: 0},
		{name: "not called from the start, past the grace", seq: []probeAt{{notCalled, 0}, {notCalled, time.Minute}, {notCalled, late}, {notCalled, late + time.Minute}},
			events: []string{"Warning " + ReasonNotCalled}, gauge: 0},
		{name: "not called past the grace, then called", seq: []probeAt{{notCalled, 0}, {notCalled, late}, {called, late + time.Minute}},
			events: []string{"Warning " + ReasonNotCalled, "Normal " + ReasonCalled}, gauge: 1},
		{name: "lost, then back", seq: []probeAt{{called, 0}, {notCalled, time.Second}, {notCalled, 2 * time.Second}, {called, 3 * time.Second}},
			events: []string{"Warning " + ReasonNotCalled, "Normal " + ReasonCalled}, gauge: 1},
		{name: "the dry run fails", seq: []probeAt{{called, 0}, {failed, time.Second}}, events: []string{"Warning " + ReasonNotCalled}, gauge: 0},
		{name: "from failing to not called", seq: []probeAt{{failed, 0}, {failed, late}, {notCalled, late + time.Second}},
			events: []string{"Warning " + ReasonNotCalled, "Warning " + ReasonNotCalled}, gauge: 0},
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
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			var now time.Time
			p := &Prober{Client: c, Namespace: "og", Recorder: rec, Now: func() time.Time { return now }}
			for _, a := range tc.seq {
				next, now = a.answer, start.Add(a.at)
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
