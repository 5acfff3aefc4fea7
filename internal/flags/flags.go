// Package flags declares olmguard's bounded command-line settings once: the flag's name, its
// help, and the least value that makes sense, so binding and validation say the same thing.
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
}

// Bind registers the flag on fs, storing into p, with *p as the default.
func (d Duration) Bind(fs *flag.FlagSet, p *time.Duration) { fs.DurationVar(p, d.Name, *p, d.Usage) }

// Check reports a value under the bound, naming the flag.
func (d Duration) Check(v time.Duration) error {
	if v < d.Least {
		return fmt.Errorf("--%s %s must be at least %s", d.Name, v, d.Least)
	}
	return nil
}
