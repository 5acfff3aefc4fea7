package cluster

import (
	"context"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/testenv"
)

// FieldManager is the server-side apply field manager test/cluster uses.
const FieldManager = "olmguard-test-cluster"

// installCRDs installs testenv.CRDs() (olmguard's own OLM CRDs, or OLM's from OLMGUARD_OLM_CRDS)
// and waits until they are established. apply=true uses server-side apply (OLM's CSV CRD is too large
// for a client-side apply annotation); apply=false only creates the missing ones (a foreign cluster
// whose CRDs must not change).
func (c *Cluster) installCRDs(ctx context.Context, apply bool) error {
	defs, err := testenv.CRDs()
	if err != nil {
		return err
	}
	for _, crd := range defs {
		if apply {
			err = c.applyCRD(ctx, crd)
		} else if err = c.Client.Create(ctx, crd.DeepCopy()); apierrors.IsAlreadyExists(err) {
			err = nil
		}
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range defs {
		if err := c.waitEstablished(ctx, crd.Name); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) applyCRD(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition) error {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(crd)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(apiextensionsv1.SchemeGroupVersion.String())
	u.SetKind("CustomResourceDefinition")
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(FieldManager), client.ForceOwnership)
}

func (c *Cluster) waitEstablished(ctx context.Context, name string) error {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return false, nil
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}
