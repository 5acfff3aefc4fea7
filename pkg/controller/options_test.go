package controller_test

import (
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/test/clitest"
)

func TestFlagDefaults(t *testing.T) {
	o := controller.DefaultOptions()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"leader-elect": "false", "leader-election-namespace": "olmguard-system",
		"health-probe-bind-address": ":8082", "metrics-bind-address": ":8083",
		// A leader rides out a kube-apiserver outage of up to about 40 s (TestAPIServerRestart in
		// test/e2e runs with a longer renew deadline, whatever the restart takes).
		"leader-elect-lease-duration": "10s", "leader-elect-renew-deadline": "8s", "leader-elect-retry-period": "2s",
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("flag --%s is missing", name)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s default = %q, want %q", name, f.DefValue, want)
		}
	}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestFlagParsing(t *testing.T) {
	for name, tc := range map[string]struct {
		args    []string
		wantErr string // substring of the parse or validation error; "" means valid
		check   func(controller.Options) bool
	}{
		"all set": {
			args: []string{"--leader-elect", "--leader-election-namespace=ops", "--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:9999"},
			check: func(o controller.Options) bool {
				return o.LeaderElect && o.LeaderElectionNamespace == "ops" && o.MetricsBindAddress == "0" && o.HealthProbeBindAddress == "127.0.0.1:9999"
			},
		},
		"bad namespace":            {args: []string{"--leader-election-namespace=Bad_NS"}, wantErr: "--leader-election-namespace"},
		"empty namespace":          {args: []string{"--leader-election-namespace="}, wantErr: "--leader-election-namespace"},
		"bad metrics address":      {args: []string{"--metrics-bind-address=8080"}, wantErr: "--metrics-bind-address"},
		"bad probe address":        {args: []string{"--health-probe-bind-address=:http-alt-nope"}, wantErr: "--health-probe-bind-address"},
		"leader-elect=false works": {args: []string{"--leader-elect=false"}, check: func(o controller.Options) bool { return !o.LeaderElect }},
		"controllers listed": {args: []string{"--controllers= subscription-drift,csv-cleanup ,"},
			check: func(o controller.Options) bool {
				return strings.Join(o.Controllers, "|") == "subscription-drift|csv-cleanup"
			}},
		"controllers empty": {args: []string{"--controllers=,"}, wantErr: "lists no reconciler"},
		// Issue 18: a standby replaces a crashed leader within 20 s.
		"leader election defaults take over within 20 s": {args: nil, check: func(o controller.Options) bool {
			return o.LeaseDuration == 10*time.Second && o.RenewDeadline == 8*time.Second && o.RetryPeriod == 2*time.Second &&
				o.TakeoverBound() <= 20*time.Second
		}},
		"leader election timings": {args: []string{"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s"},
			check: func(o controller.Options) bool {
				return o.LeaseDuration == 15*time.Second && o.RenewDeadline == 10*time.Second && o.RetryPeriod == 2*time.Second
			}},
		"renew deadline not below lease": {args: []string{"--leader-elect-renew-deadline=10s"}, wantErr: "leader election timings"},
		"retry period too long":          {args: []string{"--leader-elect-retry-period=7s"}, wantErr: "leader election timings"},
		"zero retry period":              {args: []string{"--leader-elect-retry-period=0s"}, wantErr: "leader election timings"},
	} {
		t.Run(name, func(t *testing.T) {
			o := controller.DefaultOptions()
			clitest.ParseFlags(t, o.BindFlags, o.Validate, tc.args, tc.wantErr)
			if tc.check != nil && !tc.check(o) {
				t.Errorf("options = %+v", o)
			}
		})
	}
}

func TestSelected(t *testing.T) {
	all := []controller.Setup{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	o := controller.DefaultOptions()
	if got, err := o.Selected(all); err != nil || len(got) != 3 {
		t.Fatalf("default: %v, %v; want all three", got, err)
	}
	o.Controllers = []string{"c", "a"}
	got, err := o.Selected(all)
	if err != nil || len(got) != 2 || got[0].Name != "c" || got[1].Name != "a" {
		t.Fatalf("Selected(c,a) = %v, %v", got, err)
	}
	o.Controllers = []string{"a", "nope"}
	if _, err := o.Selected(all); err == nil || !strings.Contains(err.Error(), `unknown reconciler "nope" (known: a, b, c)`) {
		t.Fatalf("unknown name: error %v", err)
	}
}

func TestTakeoverBound(t *testing.T) {
	for _, tt := range []struct {
		lease, retry, want time.Duration
	}{
		{10 * time.Second, 2 * time.Second, 18800 * time.Millisecond}, // olmguard's defaults
		{15 * time.Second, 2 * time.Second, 23800 * time.Millisecond}, // controller-runtime's
		{60 * time.Second, 5 * time.Second, 82 * time.Second},         // olmguard's before issue 18
	} {
		o := controller.Options{LeaseDuration: tt.lease, RetryPeriod: tt.retry}
		if got := o.TakeoverBound(); got != tt.want {
			t.Errorf("lease %s, retry %s: TakeoverBound %s, want %s", tt.lease, tt.retry, got, tt.want)
		}
	}
}
