// Package certmanager runs cert-manager for olmguard's tests: its CRDs, read from the cert-manager
// Go module pinned in go.mod, and its own controllers as one host process
// (cmd/cert-manager-controllers), so the cert-manager overlay is exercised with the component
// that issues and injects its certificate in a real install.
package certmanager

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/manifests"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testenv"
)

// Module is the cert-manager Go module the CRDs and the controllers come from.
const Module = "github.com/cert-manager/cert-manager"

// binaryName is the command in cmd/ that runs cert-manager's controllers.
const binaryName = "cert-manager-controllers"

// CRDs reads cert-manager's CustomResourceDefinitions from the module's deploy/crds.
func CRDs() ([]*unstructured.Unstructured, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", Module).Output()
	if err != nil {
		return nil, fmt.Errorf("locating the cert-manager module: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no cert-manager CRDs in the module (%v)", err)
	}
	var crds []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		objs, err := manifests.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, o)
			}
		}
	}
	return crds, nil
}

// InstallCRDs applies cert-manager's CRDs with server-side apply and waits until the apiserver
// serves them.
func InstallCRDs(t *testing.T, c client.Client) {
	t.Helper()
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, crd := range crds {
		crd = crd.DeepCopy()
		crd.SetManagedFields(nil)
		//nolint:staticcheck // server-side apply as kubectl does it; Client.Apply takes no field validation
		if err := c.Patch(ctx, crd, client.Apply, client.FieldOwner("olmguard-test"), client.ForceOwnership); err != nil {
			t.Fatalf("applying cert-manager CRD %s: %v", crd.GetName(), err)
		}
	}
	testenv.Eventually(t, "cert-manager CRDs established", func(ctx context.Context) (bool, error) {
		for _, o := range crds {
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := c.Get(ctx, types.NamespacedName{Name: o.GetName()}, crd); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if !slices.ContainsFunc(crd.Status.Conditions, func(c apiextensionsv1.CustomResourceDefinitionCondition) bool {
				return c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}) {
				return false, nil
			}
		}
		return true, nil
	})
}

var built procs.Once

// Run runs cert-manager's controllers and CA injector against the cluster of kubeconfig until the
// test ends; it returns once they serve /readyz.
func Run(t *testing.T, kubeconfig string) *procs.Process {
	t.Helper()
	p, err := procs.Start(built.Dir(t, "./test/certmanager/cmd/"+binaryName), binaryName, "--kubeconfig", kubeconfig)
	return procs.Track(t, p, err)
}

// LogState logs the cert-manager objects of namespace (Issuers, Certificates, CertificateRequests)
// with their status, for a test that failed waiting on them.
func LogState(t *testing.T, c client.Client, namespace string) {
	t.Helper()
	for _, kind := range []string{"IssuerList", "CertificateList", "CertificateRequestList"} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("cert-manager.io/v1")
		list.SetKind(kind)
		if err := c.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			t.Logf("listing %s: %v", kind, err)
			continue
		}
		for _, o := range list.Items {
			status, _ := json.Marshal(o.Object["status"])
			t.Logf("%s %s: %s", strings.TrimSuffix(kind, "List"), o.GetName(), status)
		}
	}
}
