package flags

import (
	"flag"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	d := Duration{Name: "grace", Usage: "how long", Least: time.Second}
	v := 30 * time.Second
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	d.Bind(fs, &v)
	if f := fs.Lookup("grace"); f == nil || f.DefValue != "30s" || f.Usage != "how long" {
		t.Fatalf("flag = %+v", f)
	}
	if err := fs.Parse([]string{"--grace=2m"}); err != nil || v != 2*time.Minute {
		t.Fatalf("parse: %v, %s", err, v)
	}
	if err := d.Check(time.Second); err != nil {
		t.Errorf("the bound itself is rejected: %v", err)
	}
	if err := d.Check(-time.Second); err == nil || err.Error() != "--grace -1s must be at least 1s" {
		t.Errorf("Check(-1s) = %v", err)
	}
}
