package flags

import (
	"flag"
	"fmt"
)

// Deprecated is a setting's former flag name, still accepted because users' manifests pass it.
type Deprecated interface {
	// Deprecation is the warning a program logs when the former name was used.
	Deprecation() string
}

// Alias registers former on fs as a deprecated name of the flag name, which must be registered
// already: it takes the same values and sets the same setting. Its help names the flag that
// replaces it. A program logs the Deprecation of every alias given (fs.Visit).
func Alias(fs *flag.FlagSet, name, former string) { alias(fs, name, former, nil) }

// alias registers former, which runs check (when set) after each value it sets.
func alias(fs *flag.FlagSet, name, former string, check func() error) {
	f := fs.Lookup(name)
	if f == nil {
		panic(fmt.Sprintf("flags: alias --%s of --%s, which is not registered", former, name))
	}
	usage := "deprecated former name of --" + name
	// Show the value's type as --name's help does ("duration"); a bool flag shows none.
	if typ, _ := flag.UnquoteUsage(f); typ != "" {
		usage = fmt.Sprintf("deprecated former name of --%s (same `%s`)", name, typ)
	}
	fs.Var(aliasValue{Value: f.Value, former: former, name: name, check: check}, former, usage)
}

type aliasValue struct {
	flag.Value
	former, name string
	check        func() error
}

func (a aliasValue) Set(v string) error {
	if err := a.Value.Set(v); err != nil {
		return err
	}
	if a.check != nil {
		return a.check()
	}
	return nil
}

func (a aliasValue) Deprecation() string {
	return fmt.Sprintf("--%s is deprecated and will be removed: use --%s", a.former, a.name)
}

// IsBoolFlag keeps an alias of a bool flag usable without a value.
func (a aliasValue) IsBoolFlag() bool {
	b, ok := a.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// Deprecations returns the warnings for the deprecated names fs was given, in the order of fs.
func Deprecations(fs *flag.FlagSet) []string {
	var out []string
	fs.Visit(func(f *flag.Flag) {
		if d, ok := f.Value.(Deprecated); ok {
			out = append(out, d.Deprecation())
		}
	})
	return out
}
