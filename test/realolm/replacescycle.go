package realolm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

// OCPBUGS-23954 (OLM #3891): where olm-operator reports ClusterOperator status, a CSV labelled
// olm.clusteroperator.name whose spec.replaces names itself sends it into an endless loop.

// ClusterOperatorName is the ClusterOperator olm-operator reports status in for the
// replaces-cycle scenario, as OpenShift's olm-operator does with
// --writePackageServerStatusName=operator-lifecycle-manager-packageserver.
const ClusterOperatorName = "olmguard-test-packageserver"

// ReplacesCycleOLM is how OLM runs for the replaces-cycle scenario: reporting ClusterOperator
// status, which is where the loop is. Run it on a cluster of its own: the loop spins
// olm-operator until it stops.
func ReplacesCycleOLM() cluster.OLMOptions {
	return cluster.OLMOptions{OLMArgs: []string{"--writePackageServerStatusName=" + ClusterOperatorName}}
}

// LoopLines is how many of OLM's "<csv> replaced by <csv>" lines make a loop: the status handler
// logs that line once per step of its walk (GetFinalCSVInReplacing), and a CSV that does not
// replace itself is never logged as replaced by itself at all.
const LoopLines = 5000

// LoopLine is the line olm-operator's replacement walk logs at each step from a CSV that
// replaces itself (OLM v0.46.0, logrus text format).
func LoopLine(name string) string { return fmt.Sprintf("msg=\"%s replaced by %s\"", name, name) }

// SelfReplacingCSV is a CSV labelled for ClusterOperator status whose spec.replaces is its own name.
func SelfReplacingCSV(ns, name string) *v1alpha1.ClusterServiceVersion {
	return &v1alpha1.ClusterServiceVersion{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{olm.ClusterOperatorNameLabel: ClusterOperatorName}},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, Version: "1.0.0", Replaces: name,
			InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment", StrategySpec: runtime.RawExtension{Raw: []byte(`{"deployments":[]}`)}}},
	}
}

// LineCounter counts, in a growing log file, the lines that contain a string, reading each byte
// once (the file of a looping olm-operator grows by megabytes a second).
type LineCounter struct {
	path, needle string
	offset       int64
	partial      []byte
	count        int
	// Sample is the first line counted.
	Sample string
}

// NewLineCounter counts the lines of the file path that contain needle.
func NewLineCounter(path, needle string) *LineCounter {
	return &LineCounter{path: path, needle: needle}
}

// Read counts the lines written since the last Read and returns the count so far.
func (l *LineCounter) Read() (int, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return l.count, err
	}
	defer f.Close()
	if _, err := f.Seek(l.offset, io.SeekStart); err != nil {
		return l.count, err
	}
	buf := make([]byte, 1<<20)
	for {
		n, err := f.Read(buf)
		l.offset += int64(n)
		l.partial = append(l.partial, buf[:n]...)
		lines := bytes.Split(l.partial, []byte("\n"))
		l.partial = append([]byte(nil), lines[len(lines)-1]...)
		for _, line := range lines[:len(lines)-1] {
			if bytes.Contains(line, []byte(l.needle)) {
				l.count++
				if l.Sample == "" {
					l.Sample = string(line)
				}
			}
		}
		if errors.Is(err, io.EOF) || n == 0 {
			return l.count, nil
		}
		if err != nil {
			return l.count, err
		}
	}
}

// Growing waits until the count passes more than after, and returns it.
func (l *LineCounter) Growing(ctx context.Context, after int) (int, error) {
	var n int
	err := testenv.Poll(ctx, func(context.Context) (bool, error) {
		var err error
		n, err = l.Read()
		return n > after, err
	})
	return n, err
}

// ReplacesLoop is what stock OLM did with a self-replacing CSV: the count of its loop's lines in
// OLM's log at two reads, at the CSV's deletion and after it, and the CSV after the deletion.
type ReplacesLoop struct {
	First, Second, AtDelete, AfterDelete int
	// Took is how long the first LoopLines lines took from the CSV's creation.
	Took time.Duration
	// Sample is one of the lines.
	Sample string
	// CSVAfterDelete is "gone", "Terminating", "still there" or the error reading it;
	// Finalizers are its finalizers then.
	CSVAfterDelete string
	Finalizers     []string
}

// ReplacesLoopOnStock creates SelfReplacingCSV(ns, name) on a cluster whose OLM o runs with
// ReplacesCycleOLM, and shows the loop: more than LoopLines lines naming the CSV replaced by
// itself, still growing at a second read, and growing on after the CSV is deleted. An error says
// where the loop was not seen. Stop OLM soon after: the loop spins it until it stops.
func ReplacesLoopOnStock(ctx context.Context, c client.Client, o *cluster.OLM, ns, name string) (ReplacesLoop, error) {
	var r ReplacesLoop
	created := time.Now()
	if err := c.Create(ctx, SelfReplacingCSV(ns, name)); err != nil {
		return r, err
	}
	lines := NewLineCounter(filepath.Join(o.Dir(), "olm.log"), LoopLine(name))
	var err error
	if r.First, err = lines.Growing(ctx, LoopLines); err != nil {
		return r, fmt.Errorf("stock OLM %s: %d log lines say CSV %s replaced by itself, want more than %d (a loop): %w", o.Version, r.First, name, LoopLines, err)
	}
	r.Took, r.Sample = time.Since(created), lines.Sample
	if r.Second, err = lines.Growing(ctx, r.First); err != nil {
		return r, fmt.Errorf("stock OLM %s: the lines naming CSV %s stopped at %d: %w", o.Version, name, r.Second, err)
	}
	csv := SelfReplacingCSV(ns, name)
	if err := c.Delete(ctx, csv); err != nil {
		return r, err
	}
	if r.AtDelete, err = lines.Read(); err != nil {
		return r, err
	}
	if r.AfterDelete, err = lines.Growing(ctx, r.AtDelete); err != nil {
		return r, fmt.Errorf("stock OLM %s: the loop on CSV %s ended after its deletion at %d lines: %w", o.Version, name, r.AfterDelete, err)
	}
	err = c.Get(ctx, client.ObjectKeyFromObject(csv), csv)
	switch {
	case apierrors.IsNotFound(err):
		r.CSVAfterDelete = "gone"
	case err != nil:
		r.CSVAfterDelete = err.Error()
	case csv.DeletionTimestamp != nil:
		r.CSVAfterDelete = "Terminating"
	default:
		r.CSVAfterDelete = "still there"
	}
	r.Finalizers = csv.Finalizers
	return r, nil
}

// Admission is how the apiserver answered the creation of a CSV: its error and the warnings.
type Admission struct {
	Err      error
	Warnings string
}

// CreateSelfReplacing creates SelfReplacingCSV(ns, name) as a user does, once olmguard's
// webhook answers it: the apiserver calls a webhook only once it has read its configuration, so
// dry runs come first, until one is denied or warned about citing OCPBUGS-23954. An error says
// the webhook never answered.
func CreateSelfReplacing(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, ns, name string) (Admission, error) {
	wc, warnings, err := testenv.NewWarningClient(cfg, scheme)
	if err != nil {
		return Admission{}, err
	}
	csv := SelfReplacingCSV(ns, name)
	var last error
	if perr := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		last = wc.Create(ctx, csv.DeepCopy(), client.DryRunAll)
		return apierrors.IsForbidden(last) || strings.Contains(warnings.Take(), "OCPBUGS-23954"), nil
	}); perr != nil {
		return Admission{}, fmt.Errorf("olmguard never answered the self-replacing CSV %s/%s: last answer %v: %w", ns, name, last, perr)
	}
	err = wc.Create(ctx, csv)
	return Admission{Err: err, Warnings: warnings.Take()}, nil
}
