package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/clitest"
	"github.com/olmguard/olmguard/test/testenv"
)

// deprecation is the warning the apiserver sends with every request for Subscriptions in this
// package's control plane: doctor's machine output must stay clean of it.
const deprecation = "operators.coreos.com/v1alpha1 Subscription is deprecated in this test"

func TestMain(m *testing.M) {
	clitest.RunMainIfAsked(main)
	testenv.Main(m, deprecateSubscriptions)
}

// deprecateSubscriptions marks the Subscription CRD's version deprecated, so that every list of
// Subscriptions draws a warning, and waits until the apiserver sends it.
func deprecateSubscriptions(e *testenv.Env) (func() error, error) {
	ctx := context.Background()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := e.Client.Get(ctx, types.NamespacedName{Name: "subscriptions.operators.coreos.com"}, crd); err != nil {
		return nil, err
	}
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Deprecated = true
		crd.Spec.Versions[i].DeprecationWarning = ptr(deprecation)
	}
	if err := e.Client.Update(ctx, crd); err != nil {
		return nil, err
	}
	c, w, err := testenv.NewWarningClient(e.Config, e.Scheme)
	if err != nil {
		return nil, err
	}
	err = testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		if err := c.List(ctx, &v1alpha1.SubscriptionList{}); err != nil {
			return false, err
		}
		return strings.Contains(w.Take(), deprecation), nil
	})
	if err != nil {
		return nil, fmt.Errorf("the apiserver never warned of the deprecated Subscriptions: %w", err)
	}
	return nil, nil
}

func ptr[T any](v T) *T { return &v }

// With -o json and -o yaml, stdout holds the report only, and parses, while the apiserver warns:
// the warning goes to stderr, once. Fails when the warnings go to stdout.
func TestDoctorMachineOutputWithWarnings(t *testing.T) {
	e := testenv.Shared(t)
	kubeconfig := testenv.WriteKubeconfig(t, e.Config)
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			code, out, errOut := runFor("--kubeconfig", kubeconfig, "doctor", "-A", "-o", format)
			if code == 2 {
				t.Fatalf("exit 2: %s", errOut)
			}
			var report doctor.Report
			var err error
			if format == "json" {
				err = json.Unmarshal([]byte(out), &report)
			} else {
				err = yaml.UnmarshalStrict([]byte(out), &report)
			}
			if err != nil || report.Checked == nil {
				t.Fatalf("stdout does not parse as %s (%v):\n%s", format, err, out)
			}
			if report.Checked["Subscriptions"] != 0 {
				t.Errorf("checked %v", report.Checked)
			}
			if strings.Count(errOut, "Warning: "+deprecation) != 1 {
				t.Errorf("stderr holds the warning %d times, want once:\n%s", strings.Count(errOut, "Warning: "+deprecation), errOut)
			}
		})
	}
}

// The apiserver's warnings are printed once each, escaped (a webhook's warning may quote what a
// tenant wrote); other codes than 299 are not warnings.
func TestWarningPrinter(t *testing.T) {
	var out bytes.Buffer
	p := &warningPrinter{w: &out, seen: map[string]bool{}}
	ctx := context.Background()
	p.HandleWarningHeaderWithContext(ctx, 299, "", "name \x1b[2Jx")
	p.HandleWarningHeaderWithContext(ctx, 299, "", "name \x1b[2Jx")
	p.HandleWarningHeaderWithContext(ctx, 199, "", "other")
	p.HandleWarningHeaderWithContext(ctx, 299, "", "second\nline")
	if want := "Warning: name \\x1b[2Jx\nWarning: second line\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}

// TestProbe: probe dry-runs the marked ConfigMap in olmguard's namespace. envtest runs no webhook,
// so nothing marks it: exit 1, NotCalled on stdout. A namespace that does not exist: exit 2.
func TestProbe(t *testing.T) {
	e := testenv.Shared(t)
	kubeconfig := testenv.WriteKubeconfig(t, e.Config)
	ns := testenv.FreshNamespace(t, e.Client, "probe")
	code, out, errOut := runFor("--kubeconfig", kubeconfig, "probe", "--olmguard-namespace", ns)
	if code != 1 || !strings.HasPrefix(out, "NotCalled: ") {
		t.Errorf("no webhook: exit %d, stdout %q, stderr %q; want 1 and NotCalled", code, out, errOut)
	}
	code, out, errOut = runFor("--kubeconfig", kubeconfig, "probe", "--olmguard-namespace", "no-such-namespace")
	if code != 2 || out != "" || !strings.Contains(errOut, "no-such-namespace") {
		t.Errorf("no namespace: exit %d, stdout %q, stderr %q; want 2", code, out, errOut)
	}
}
