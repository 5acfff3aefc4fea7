package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	if !apply {
		return c.createCRDs(ctx, defs)
	}
	for _, crd := range defs {
		if err := c.applyCRD(ctx, crd); err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	return c.waitAllEstablished(ctx, defs)
}

// createCRDs creates those of defs the cluster has none of that name (a foreign cluster's stay as
// they are), and waits until every one is established.
func (c *Cluster) createCRDs(ctx context.Context, defs []*apiextensionsv1.CustomResourceDefinition) error {
	for _, crd := range defs {
		if err := c.Client.Create(ctx, crd.DeepCopy()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	return c.waitAllEstablished(ctx, defs)
}

func (c *Cluster) waitAllEstablished(ctx context.Context, defs []*apiextensionsv1.CustomResourceDefinition) error {
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

// clusterOperatorGVK is OpenShift's ClusterOperator, where its operators report their status.
var clusterOperatorGVK = schema.GroupVersionKind{Group: openShiftConfigGroup, Version: "v1", Kind: "ClusterOperator"}

const openShiftConfigGroup = "config.openshift.io"

// openShiftConfigCRDs serve the kinds of OpenShift's config.openshift.io/v1 that its fork of
// olm-operator reads: ClusterOperator, where it reports its status (--writeStatusName), and Proxy,
// the cluster's proxy settings, which it watches once the group is served (its discovery looks at
// the group). Without them it stopped every 2 minutes, its cache waiting for ClusterOperator;
// with the group and no Proxy, it never starts. olmguard's own minimal definitions:
// cluster-scoped, a status subresource, fields unchecked.
func openShiftConfigCRDs() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{
		clusterScopedCRD(clusterOperatorGVK, "clusteroperators", "co"),
		clusterScopedCRD(clusterOperatorGVK.GroupVersion().WithKind("Proxy"), "proxies"),
	}
}

func clusterScopedCRD(gvk schema.GroupVersionKind, plural string, shortNames ...string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + gvk.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: gvk.Group,
			Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.ToLower(gvk.Kind),
				Kind: gvk.Kind, ListKind: gvk.Kind + "List", ShortNames: shortNames},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: gvk.Version, Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}
}

// waitClusterOperator waits until the ClusterOperator name exists.
func (c *Cluster) waitClusterOperator(ctx context.Context, name string) error {
	co := &unstructured.Unstructured{}
	co.SetGroupVersionKind(clusterOperatorGVK)
	return testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, co)
		return err == nil, client.IgnoreNotFound(err)
	})
}
