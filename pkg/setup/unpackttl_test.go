package setup

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/olmguard/olmguard/internal/flags"
)

// The webhook's and the controller's --unpack-job-ttl meant two settings: each has its own name
// now, and the former one still sets it, with a deprecation warning (fails before the fix: neither
// --unpack-job-default-ttl nor --unpack-job-retention existed).
func TestUnpackJobTTLNames(t *testing.T) {
	const deprecatedWebhook = "--unpack-job-ttl is deprecated and will be removed: use --unpack-job-default-ttl"
	const deprecatedController = "--unpack-job-ttl is deprecated and will be removed: use --unpack-job-retention"
	for name, tc := range map[string]struct {
		controller bool // the controller's flags, else the webhook's
		args       []string
		want       time.Duration
		wantErr    string
		warnings   []string
	}{
		"webhook, new name":           {args: []string{"--unpack-job-default-ttl=5m"}, want: 5 * time.Minute},
		"webhook, 0 leaves Jobs":      {args: []string{"--unpack-job-default-ttl=0s"}, want: 0},
		"webhook, former name":        {args: []string{"--unpack-job-ttl=7m"}, want: 7 * time.Minute, warnings: []string{deprecatedWebhook}},
		"webhook, default":            {want: 10 * time.Minute},
		"controller, new name":        {controller: true, args: []string{"--unpack-job-retention=1h"}, want: time.Hour},
		"controller, former name":     {controller: true, args: []string{"--unpack-job-ttl=2h"}, want: 2 * time.Hour, warnings: []string{deprecatedController}},
		"controller, new, too low":    {controller: true, args: []string{"--unpack-job-retention=5s"}, wantErr: "--unpack-job-retention 5s must be at least 1m0s"},
		"controller, former, too low": {controller: true, args: []string{"--unpack-job-ttl=5s"}, wantErr: "--unpack-job-ttl 5s must be at least 1m0s"},
		"controller, default":         {controller: true, want: 10 * time.Minute},
	} {
		t.Run(name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(new(strings.Builder))
			w, c := DefaultWebhook(), DefaultController()
			got, validate := &w.UnpackJobTTL, func() error { return nil }
			if tc.controller {
				c.BindFlags(fs)
				// A closure: the method value c.Validate would copy c before the flags are parsed.
				got, validate = &c.UnpackJobs.TTL, func() error { return c.Validate() } //nolint:gocritic // see above
			} else {
				w.BindFlags(fs)
			}
			err := fs.Parse(tc.args)
			if err == nil {
				err = validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got != tc.want {
				t.Errorf("value %s, want %s", *got, tc.want)
			}
			if d := flags.Deprecations(fs); !slices.Equal(d, tc.warnings) {
				t.Errorf("deprecations %q, want %q", d, tc.warnings)
			}
		})
	}
}
