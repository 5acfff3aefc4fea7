// Package cli is the command-line frame shared by olmguard's binaries: flags with their defaults
// in --help, one-line errors with exit status 2, controller-runtime logging, the kubeconfig, and a
// run that stops cleanly on SIGTERM.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/olmguard/olmguard/internal/flags"
	"github.com/olmguard/olmguard/internal/kubeapi"
	"github.com/olmguard/olmguard/internal/version"
)

// Command describes one binary.
type Command struct {
	// Name is the program name in messages; About is one sentence for --help.
	Name, About string
	// Bind registers the command's own flags.
	Bind func(*flag.FlagSet)
	// Validate checks the parsed flags.
	Validate func() error
	// Run does the work until ctx is done (SIGTERM or SIGINT).
	Run func(ctx context.Context, cfg *rest.Config) error
}

// Main returns the exit status: 0 on success or --help, 2 on a bad flag, 1 on a runtime failure.
func (c Command) Main(args []string, stdout, stderr io.Writer) int {
	zapOpts := zap.Options{}
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	c.Bind(fs)
	config.RegisterFlags(fs) // --kubeconfig
	qps := fs.Float64("kube-api-qps", kubeapi.DefaultQPS, "client-side limit of requests per second to the kube-apiserver")
	burst := fs.Int("kube-api-burst", kubeapi.DefaultBurst, "client-side burst of requests to the kube-apiserver")
	zapOpts.BindFlags(fs)
	showVersion := fs.Bool("version", false, "print the version and commit this binary was built from, and exit")
	validate := func() error {
		if *showVersion {
			return nil
		}
		if *qps <= 0 || *burst < 1 {
			return fmt.Errorf("--kube-api-qps %g and --kube-api-burst %d must be positive", *qps, *burst)
		}
		if c.Validate != nil {
			return c.Validate()
		}
		return nil
	}
	if code, done := parse(fs, args, stdout, stderr, c.About, validate); done {
		return code
	}
	if *showVersion {
		fmt.Fprintln(stdout, version.Get().String(c.Name))
		return 0
	}

	zapOpts.DestWriter = stderr
	logger := zap.New(zap.UseFlagOptions(&zapOpts))
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	for _, warning := range flags.Deprecations(fs) {
		logger.WithName("flags").Info(warning)
	}
	cfg, err := config.GetConfig()
	if err != nil {
		fmt.Fprintf(stderr, "%s: loading kubeconfig: %v\n", c.Name, err)
		return 1
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	// The apiserver names a write's field manager after the user agent's first part: olmguard's
	// patches on OLM's objects then read as olmguard's in managedFields, audit logs and conflicts.
	cfg.UserAgent = kubeapi.UserAgent(c.Name)
	if err := c.Run(ctrl.SetupSignalHandler(), cfg); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", c.Name, err)
		return 1
	}
	return 0
}

// parse parses the flags and validates them. done is true when the program must exit with code:
// after --help, or after a one-line error on stderr.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, about string, validate func() error) (code int, done bool) {
	fs.SetOutput(io.Discard) // errors are printed here, on one line
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		usage(stdout, fs, about)
		return 0, true
	case err != nil:
	case fs.NArg() > 0:
		err = fmt.Errorf("unexpected argument %q", fs.Arg(0))
	default:
		err = validate()
	}
	if err != nil {
		// The flag package names flags with one dash; the documentation uses two.
		msg := singleDash.ReplaceAllString(err.Error(), "$1--$2")
		fmt.Fprintf(stderr, "%s: %s (see --help)\n", fs.Name(), msg)
		return 2, true
	}
	return 0, false
}

// singleDash finds a flag name written with one dash in the flag package's errors.
var singleDash = regexp.MustCompile(`(\s)-([a-zA-Z])`)

// zapDefaults are the effective defaults of controller-runtime's logging flags, whose flag
// values are empty (production mode).
var zapDefaults = map[string]string{
	"zap-encoder": "json", "zap-log-level": "info", "zap-stacktrace-level": "error", "zap-time-encoding": "epoch",
}

// usage lists every flag with its default, empty ones included.
func usage(w io.Writer, fs *flag.FlagSet, about string) {
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s.\n\nFlags:\n", fs.Name(), about)
	fs.VisitAll(func(f *flag.Flag) {
		typ, text := flag.UnquoteUsage(f)
		if typ != "" {
			typ = " " + typ
		}
		def := f.DefValue
		if d, ok := zapDefaults[f.Name]; ok {
			def = d
		} else if def == "" || strings.ContainsAny(def, " \t") {
			def = fmt.Sprintf("%q", def)
		}
		fmt.Fprintf(w, "  --%s%s\n    \t%s (default %s)\n", f.Name, typ, text, def)
	})
}
