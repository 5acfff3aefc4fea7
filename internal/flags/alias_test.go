package flags

import (
	"flag"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestAlias(t *testing.T) {
	for name, tc := range map[string]struct {
		args     []string
		want     time.Duration
		wantErr  string   // substring of the parse error
		warnings []string // Deprecations after the parse
	}{
		"new name":             {args: []string{"--new=2m"}, want: 2 * time.Minute},
		"former name":          {args: []string{"--old=3m"}, want: 3 * time.Minute, warnings: []string{"--old is deprecated and will be removed: use --new"}},
		"neither: the default": {want: 10 * time.Minute},
		"both: the last wins":  {args: []string{"--old=3m", "--new=4m"}, want: 4 * time.Minute, warnings: []string{"--old is deprecated and will be removed: use --new"}},
		"former, bad value":    {args: []string{"--old=3"}, wantErr: `invalid value "3" for flag -old`},
	} {
		t.Run(name, func(t *testing.T) {
			v := 10 * time.Minute
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(new(strings.Builder))
			fs.DurationVar(&v, "new", v, "how long")
			Alias(fs, "new", "old")
			err := fs.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v != tc.want {
				t.Errorf("value %s, want %s", v, tc.want)
			}
			if got := Deprecations(fs); !slices.Equal(got, tc.warnings) {
				t.Errorf("deprecations %q, want %q", got, tc.warnings)
			}
		})
	}
}

// The alias shows the same type and default as the flag it stands for, and names it.
func TestAliasHelp(t *testing.T) {
	v, b := time.Minute, false
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.DurationVar(&v, "new", v, "how long")
	fs.BoolVar(&b, "on", b, "switch")
	Alias(fs, "new", "old")
	Alias(fs, "on", "enabled")
	old := fs.Lookup("old")
	if typ, usage := flag.UnquoteUsage(old); typ != "duration" || usage != "deprecated former name of --new (same duration)" || old.DefValue != "1m0s" {
		t.Errorf("--old: type %q, usage %q, default %q", typ, usage, old.DefValue)
	}
	if typ, _ := flag.UnquoteUsage(fs.Lookup("enabled")); typ != "" {
		t.Errorf("--enabled: type %q, want none (a bool)", typ)
	}
	if err := fs.Parse([]string{"--enabled"}); err != nil || !b {
		t.Errorf("--enabled without a value: %v, %v", err, b)
	}
}

func TestAliasOfUnknownFlagPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	Alias(flag.NewFlagSet("t", flag.ContinueOnError), "missing", "old")
}

// A bounded duration's former name is checked as it is set, so the error names the flag as the
// user wrote it; the new name is checked by Check, as before.
func TestDurationFormer(t *testing.T) {
	d := Duration{Name: "unpack-job-retention", Least: time.Minute, Usage: "how long", Former: "unpack-job-ttl"}
	for name, tc := range map[string]struct {
		args    []string
		wantErr string
		want    time.Duration
	}{
		"former, valid":        {args: []string{"--unpack-job-ttl=1h"}, want: time.Hour},
		"former, under bound":  {args: []string{"--unpack-job-ttl=5s"}, wantErr: "--unpack-job-ttl 5s must be at least 1m0s"},
		"new, under bound":     {args: []string{"--unpack-job-retention=5s"}, wantErr: "--unpack-job-retention 5s must be at least 1m0s"},
		"former then new, bad": {args: []string{"--unpack-job-ttl=1h", "--unpack-job-retention=5s"}, wantErr: "--unpack-job-retention 5s must be at least 1m0s"},
		"new then former, bad": {args: []string{"--unpack-job-retention=1h", "--unpack-job-ttl=5s"}, wantErr: "--unpack-job-ttl 5s must be at least 1m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			v := 10 * time.Minute
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(new(strings.Builder))
			d.Bind(fs, &v)
			err := fs.Parse(tc.args)
			if err == nil {
				err = d.Check(v)
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || v != tc.want {
				t.Fatalf("%s, %v; want %s", v, err, tc.want)
			}
		})
	}
}
