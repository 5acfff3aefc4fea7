package realolm

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

// OCPBUGS-37982, OLM #2701: OLM copies the CSV of an operator installed for all namespaces into
// every other namespace, and keeps each copy in sync.

// Omega is installed for AllNamespaces only: no other scenario provides its API, so OLM's
// check that operator groups do not provide the same API twice leaves it alone.
var Omega = Package{Name: "omega", Versions: []string{"1.0.0"}}

// GlobalOperators returns the namespace whose OperatorGroup targets every namespace: o's global
// operators namespace (openshift-operators on OpenShift's layout), or else `operators` with the
// OperatorGroup global-operators, as upstream OLM's install creates them. One for the cluster,
// shared by every scenario: a second AllNamespaces group would claim the same APIs, and OLM does
// not install an operator whose API another group still lists (olm.providedAPIs) until it has
// recomputed that group's list (seen as "copied into 0 of 14 namespaces" on v0.46.0 when each
// scenario made a global namespace of its own).
func GlobalOperators(ctx context.Context, c client.Client, o *cluster.OLM) (string, error) {
	if o.GlobalOperatorsNamespace != "" {
		return o.GlobalOperatorsNamespace, nil
	}
	const ns = "operators"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cluster.GlobalOperatorGroup}}
	if err := c.Create(ctx, og); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	return ns, nil
}

// OwnCSVs lists the CSVs of ns that are not OLM's copies of a CSV installed for all namespaces
// elsewhere (label olm.copiedFrom): what was installed in ns itself. A scenario that checks what an
// install or uninstall left in its namespace reads these, so that an AllNamespaces operator of
// another scenario, copied into every namespace, is not taken for its own.
func OwnCSVs(ctx context.Context, c client.Client, ns string) ([]v1alpha1.ClusterServiceVersion, error) {
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if err := c.List(ctx, csvs, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	own := csvs.Items[:0]
	for _, csv := range csvs.Items {
		if csv.Labels[olm.CopiedFromLabel] == "" {
			own = append(own, csv)
		}
	}
	return own, nil
}

// CopiesOf counts OLM's copies of CSV name from namespace from (label olm.copiedFrom, reason
// Copied) that are not being deleted.
func CopiesOf(ctx context.Context, c client.Client, from, name string) (int, error) {
	csvs := &v1alpha1.ClusterServiceVersionList{}
	if err := c.List(ctx, csvs, client.MatchingLabels{olm.CopiedFromLabel: from}); err != nil {
		return 0, err
	}
	n := 0
	for _, csv := range csvs.Items {
		if csv.Name == name && csv.DeletionTimestamp == nil && csv.Status.Reason == v1alpha1.CSVReasonCopied {
			n++
		}
	}
	return n, nil
}

// activeNamespaces counts the namespaces that are not being deleted.
func activeNamespaces(ctx context.Context, c client.Client) (int, error) {
	list := &corev1.NamespaceList{}
	if err := c.List(ctx, list); err != nil {
		return 0, err
	}
	n := 0
	for _, ns := range list.Items {
		if ns.DeletionTimestamp == nil {
			n++
		}
	}
	return n, nil
}

// CopiedEverywhere is an AllNamespaces install as OLM leaves it: the original CSV, and how many
// copies OLM made of it in the namespaces of the cluster.
type CopiedEverywhere struct {
	Namespace, CSV string
	// Copies is how many copies OLM made, Elsewhere how many other namespaces there are.
	Copies, Elsewhere int
}

// InstallEverywhere subscribes to pkg in the global operators namespace (GlobalOperators), waits
// until its CSV has Succeeded and OLM has copied it into every other namespace, and returns the
// count. The copies OLM made when it stops short of every namespace are an error.
func InstallEverywhere(ctx context.Context, c client.Client, o *cluster.OLM, pkg Package) (CopiedEverywhere, error) {
	ns, err := GlobalOperators(ctx, c, o)
	if err != nil {
		return CopiedEverywhere{}, err
	}
	r := CopiedEverywhere{Namespace: ns, CSV: pkg.CSVName(pkg.Versions[0])}
	if err := c.Create(ctx, NewSubscription(ns, pkg.Name, pkg, v1alpha1.ApprovalAutomatic, "")); err != nil {
		return r, err
	}
	if err := CSVSucceeded(ctx, c, ns, r.CSV); err != nil {
		return r, err
	}
	err = testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		all, err := activeNamespaces(ctx, c)
		if err != nil {
			return false, err
		}
		r.Elsewhere = all - 1
		r.Copies, err = CopiesOf(ctx, c, ns, r.CSV)
		return r.Copies >= r.Elsewhere, err
	})
	if err != nil {
		return r, fmt.Errorf("OLM copied CSV %s/%s into %d of the %d other namespaces: %w", ns, r.CSV, r.Copies, r.Elsewhere, err)
	}
	return r, nil
}

// DisableCopiedCSVs sets OLMConfig cluster's spec.features.disableCopiedCSVs, creating the
// OLMConfig when there is none, as `kubectl olmguard doctor`'s fix for CopiedCSVsMultiply says.
func DisableCopiedCSVs(ctx context.Context, c client.Client) error {
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(schema.GroupVersionKind{Group: olm.Group, Version: olm.OLMConfigVersion, Kind: olm.OLMConfigKind})
	cfg.SetName(olm.OLMConfigName)
	patch := []byte(`{"spec":{"features":{"disableCopiedCSVs":true}}}`)
	err := c.Patch(ctx, cfg.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	if !apierrors.IsNotFound(err) {
		return err
	}
	if err := unstructured.SetNestedField(cfg.Object, true, "spec", "features", "disableCopiedCSVs"); err != nil {
		return err
	}
	return c.Create(ctx, cfg)
}

// NoCopiesOf waits until OLM has deleted every copy of CSV name from namespace from.
func NoCopiesOf(ctx context.Context, c client.Client, from, name string) error {
	n := 0
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		var err error
		n, err = CopiesOf(ctx, c, from, name)
		return n == 0, err
	})
	if err != nil {
		return fmt.Errorf("%d copies of CSV %s/%s left: %w", n, from, name, err)
	}
	return nil
}
