package ha_test

// What the F1 read costs on an InstallPlan CREATE, through the apiserver, with one apiserver (the
// plan and the webhook's lookup through A) and two (the plan through A, the lookup through B, as a
// webhook behind a Service reaches any of them). Modes are interleaved per iteration: off (a
// namespace the webhook configurations exclude), consistent (the default) and watch-cache. Each
// mode reports the request's p50/p99 and the lookup's (lookup-<mode>-p50/p99-ns), and
// added-<mode>-p50/p99-ns against off.
//
// OLM creates a plan per install or upgrade, seconds apart at the least: arrival=isolated leaves
// 200 ms before each request, longer than the apiserver's 100 ms progress-request period, which a
// consistent List from the watch cache waits on when another one ran just before;
// arrival=burst sends them back to back, the worst case. `make bench` runs it 300 times.

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/latency"
	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/testenv"
)

// timedLookup records how long each List takes.
type timedLookup struct {
	admit.Subscriptions
	rec *latency.Recorder
}

func (l timedLookup) List(ctx context.Context, ns string, metadataOnly bool) (subs []v1alpha1.Subscription, err error) {
	l.rec.Time(func() { subs, err = l.Subscriptions.List(ctx, ns, metadataOnly) })
	return subs, err
}

func BenchmarkInstallPlanCreate(b *testing.B) {
	if pair == nil {
		b.Skip("needs kube-apiserver and etcd")
	}
	const benchNS = "bench-f1"
	ctx := context.Background()
	for _, ns := range []string{benchNS, olmguard.DefaultNamespace} {
		if err := pair.A.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
		for i := range 10 {
			if err := pair.A.Client.Create(ctx, builders.Subscription(ns, fmt.Sprintf("s%d", i), fmt.Sprintf("s%d", i), v1alpha1.ApprovalAutomatic)); client.IgnoreAlreadyExists(err) != nil {
				b.Fatal(err)
			}
		}
	}
	defer lookups.use(liveSubscriptions(pair.A.Client, false))
	for _, apiservers := range []struct {
		name   string
		reader *testenv.Env
	}{{"apiservers=1", pair.A}, {"apiservers=2", pair.B}} {
		for _, arrival := range []struct {
			name string
			gap  time.Duration
		}{{"arrival=isolated", 200 * time.Millisecond}, {"arrival=burst", 0}} {
			b.Run(apiservers.name+"/"+arrival.name, func(b *testing.B) {
				benchmarkCreates(b, apiservers.reader, arrival.gap, benchNS)
			})
		}
	}
}

func benchmarkCreates(b *testing.B, reader *testenv.Env, gap time.Duration, ns string) {
	ctx := context.Background()
	modes := []string{"off", admit.ReadConsistent, admit.ReadWatchCache}
	requests, lookupTimes := map[string]*latency.Recorder{}, map[string]*latency.Recorder{}
	listers := map[string]admit.Subscriptions{}
	for _, m := range modes {
		requests[m], lookupTimes[m] = &latency.Recorder{}, &latency.Recorder{}
		listers[m] = timedLookup{liveSubscriptions(reader.Client, m == admit.ReadWatchCache), lookupTimes[m]}
	}
	var created []client.Object
	defer func() {
		for _, o := range created {
			_ = pair.A.Client.Delete(ctx, o)
		}
	}()
	i := 0
	for b.Loop() {
		for k := range modes {
			mode := modes[(i+k)%len(modes)]
			target := ns
			if mode == "off" {
				target = olmguard.DefaultNamespace
			} else {
				lookups.use(listers[mode])
			}
			if gap > 0 {
				b.StopTimer()
				time.Sleep(gap)
				b.StartTimer()
			}
			ip := builders.InstallPlan(target)
			var err error
			requests[mode].Time(func() { err = pair.A.Client.Create(ctx, ip) })
			if err != nil {
				b.Fatalf("%s: %v", mode, err)
			}
			created = append(created, ip)
			if want := map[bool]int{true: 0, false: 10}[mode == "off"]; len(ip.OwnerReferences) != want {
				b.Fatalf("%s: plan has %d owners, want %d", mode, len(ip.OwnerReferences), want)
			}
		}
		i++
	}
	for _, m := range modes {
		requests[m].ReportAs(b, m)
		if m != "off" {
			lookupTimes[m].ReportAs(b, "lookup-"+m)
			for _, p := range []float64{50, 99} {
				d := requests[m].Percentile(p) - requests["off"].Percentile(p)
				b.ReportMetric(float64(d.Nanoseconds()), fmt.Sprintf("added-%s-p%.0f-ns", m, p))
			}
		}
	}
}
