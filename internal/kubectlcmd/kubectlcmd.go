// Package kubectlcmd builds the kubectl commands olmguard prints for an admin to run. Each is one
// kubectl invocation whose object names are validated as Kubernetes names of their kind and whose
// arguments are quoted for a POSIX shell: a name a tenant wrote (an ownerReference, a label) can
// neither end the command nor start another one. A name that is not valid makes the command an
// error that says which name, so that the caller prints no command and says why.
package kubectlcmd

import (
	"errors"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/olmguard/olmguard/internal/shellquote"
)

// Kinds whose names follow another rule than a DNS-1123 subdomain (most objects' rule).
const (
	Namespace = "Namespace" // DNS-1123 label
	Service   = "Service"   // DNS-1035 label
	Container = "container" // DNS-1123 label
)

// NameError is a name that is not a valid Kubernetes name of its kind.
type NameError struct {
	// Field names what the name is, e.g. "ConfigMap name" or "label value".
	Field string
	Value string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("%s %s is not a valid Kubernetes name", e.Field, strconv.Quote(e.Value))
}

// ValidateName checks name as the name of an object of kind: a DNS-1123 label for namespaces
// and containers, a DNS-1035 label for Services, a DNS-1123 subdomain for every other kind.
func ValidateName(kind, name string) error {
	var errs []string
	switch kind {
	case Namespace, Container:
		errs = validation.IsDNS1123Label(name)
	case Service:
		errs = validation.IsDNS1035Label(name)
	default:
		errs = validation.IsDNS1123Subdomain(name)
	}
	if len(errs) > 0 {
		return &NameError{Field: kind + " name", Value: name}
	}
	return nil
}

// ValidateLabel checks a label selector term key=value.
func ValidateLabel(key, value string) error {
	if len(validation.IsQualifiedName(key)) > 0 {
		return &NameError{Field: "label key", Value: key}
	}
	if len(validation.IsValidLabelValue(value)) > 0 || value == "" {
		return &NameError{Field: "label value", Value: value}
	}
	return nil
}

// Command is one kubectl invocation being built. Its methods return the extended command; the
// first invalid name is kept as its error.
type Command struct {
	args []string
	err  error
}

// New starts a command `kubectl args...`; args are literals of olmguard's own (never a name read
// from the cluster).
func New(args ...string) Command {
	return Command{args: append([]string{"kubectl"}, args...)}
}

// In starts a command `kubectl -n namespace args...`, the namespace validated.
func In(namespace string, args ...string) Command {
	return New().Name("-n", Namespace, namespace).Args(args...)
}

// Args appends literal arguments of olmguard's own.
func (c Command) Args(args ...string) Command {
	c.args = append(append([]string(nil), c.args...), args...)
	return c
}

// Name appends the name of an object of kind, validated, after the literal flag when it is not
// "" (e.g. "-n", "-c").
func (c Command) Name(flag, kind, name string) Command {
	if err := ValidateName(kind, name); err != nil {
		return c.fail(err)
	}
	if flag != "" {
		c = c.Args(flag)
	}
	return c.Args(name)
}

// Ref appends resource/name (e.g. job/NAME), the name validated as one of kind.
func (c Command) Ref(resource, kind, name string) Command {
	if err := ValidateName(kind, name); err != nil {
		return c.fail(err)
	}
	return c.Args(resource + "/" + name)
}

// Selector appends `-l key=value`, the key and value validated.
func (c Command) Selector(key, value string) Command {
	if err := ValidateLabel(key, value); err != nil {
		return c.fail(err)
	}
	return c.Args("-l", key+"="+value)
}

func (c Command) fail(err error) Command {
	if c.err == nil {
		c.err = err
	}
	return c
}

// Argv is the command's arguments, kubectl first, or the error of its first invalid name.
func (c Command) Argv() ([]string, error) {
	if c.err != nil {
		return nil, c.err
	}
	if len(c.args) == 0 {
		return nil, errors.New("kubectlcmd: empty command")
	}
	return append([]string(nil), c.args...), nil
}

// String is the command as a POSIX shell reads it, every argument quoted, or the error of its
// first invalid name.
func (c Command) String() (string, error) {
	argv, err := c.Argv()
	if err != nil {
		return "", err
	}
	return shellquote.Join(argv), nil
}

// Build renders every command, or none: the error of the first with an invalid name.
func Build(cmds ...Command) ([]string, error) {
	out := make([]string, 0, len(cmds))
	for _, c := range cmds {
		s, err := c.String()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}
