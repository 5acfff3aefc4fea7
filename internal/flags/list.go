package flags

import (
	"errors"
	"strings"
)

// List is a comma-separated list flag, the one list syntax of olmguard's binaries: items are
// trimmed and empty ones dropped, so "a, b,,c" lists a, b and c.
type List struct {
	// Items receives the list.
	Items *[]string
	// Check, when set, rejects an item; its error is the flag's.
	Check func(item string) error
	// Required, when set, is the error for a value that lists nothing. Without it such a value
	// sets an empty list (not nil).
	Required string
	// Append adds each use's items to the list instead of replacing it.
	Append bool
}

// String is the list as it would be given.
func (l List) String() string {
	if l.Items == nil {
		return ""
	}
	return strings.Join(*l.Items, ",")
}

// Set parses one use of the flag.
func (l List) Set(v string) error {
	out := []string{}
	for _, x := range strings.Split(v, ",") {
		if x = strings.TrimSpace(x); x == "" {
			continue
		}
		if l.Check != nil {
			if err := l.Check(x); err != nil {
				return err
			}
		}
		out = append(out, x)
	}
	if len(out) == 0 && l.Required != "" {
		return errors.New(l.Required)
	}
	if l.Append {
		out = append(*l.Items, out...)
	}
	*l.Items = out
	return nil
}
