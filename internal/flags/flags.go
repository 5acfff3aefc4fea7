// Package flags holds the flag types of olmguard's binaries, each written once: bounded
// durations (the flag's name, its help, and the least value that makes sense, so binding and
// validation say the same thing), comma-separated lists (List) and deprecated former names
// (Alias).
package flags

import (
	"flag"
	"fmt"
	"time"
)

// Duration is a duration flag with a lower bound.
type Duration struct {
	Name, Usage string
	Least       time.Duration
	// Former is the flag's deprecated former name (Alias), "" for none. A value given under it
	// is checked at once, so that the error names the flag as it was written.
	Former string
}

// Bind registers the flag on fs, storing into p, with *p as the default, and its former name.
func (d Duration) Bind(fs *flag.FlagSet, p *time.Duration) {
	fs.DurationVar(p, d.Name, *p, d.Usage)
	if d.Former != "" {
		former := Duration{Name: d.Former, Least: d.Least}
		alias(fs, d.Name, d.Former, func() error { return former.Check(*p) })
	}
}

// Check reports a value under the bound, naming the flag.
func (d Duration) Check(v time.Duration) error {
	if v < d.Least {
		return fmt.Errorf("--%s %s must be at least %s", d.Name, v, d.Least)
	}
	return nil
}
