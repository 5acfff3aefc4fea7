package olmsim

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// CreateOperatorGroup creates an OperatorGroup as a user would (targets empty: all namespaces)
// and writes the status OLM computes for it.
func (s *Sim) CreateOperatorGroup(ctx context.Context, ns, name string, targets ...string) (*olmv1.OperatorGroup, error) {
	if err := s.EnsureNamespace(ctx, ns); err != nil {
		return nil, err
	}
	og := &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: olmv1.OperatorGroupSpec{TargetNamespaces: targets}}
	if err := s.Admin.Create(ctx, og); err != nil {
		return nil, fmt.Errorf("creating OperatorGroup %s/%s: %w", ns, name, err)
	}
	og.Status.Namespaces = targets
	if len(targets) == 0 {
		og.Status.Namespaces = []string{metav1.NamespaceAll}
	}
	for _, t := range targets {
		if err := s.EnsureNamespace(ctx, t); err != nil {
			return nil, err
		}
	}
	og.Status.LastUpdated = s.now()
	return og, s.Client.Status().Update(ctx, og)
}

// operatorGroup returns the single OperatorGroup of a namespace, nil if there is none.
func (s *Sim) operatorGroup(ctx context.Context, ns string) (*olmv1.OperatorGroup, error) {
	list := &olmv1.OperatorGroupList{}
	if err := s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	switch len(list.Items) {
	case 0:
		return nil, nil
	case 1:
		return &list.Items[0], nil
	}
	return nil, fmt.Errorf("found %d operatorGroups in namespace %s, expected 1", len(list.Items), ns)
}

func (s *Sim) operatorGroupAnnotation(ctx context.Context, ns, key string) (string, error) {
	og, err := s.operatorGroup(ctx, ns)
	if err != nil || og == nil {
		return "", err
	}
	return og.Annotations[key], nil
}

// CreateSubscription creates a Subscription to a package of a catalog, as a user would.
func (s *Sim) CreateSubscription(ctx context.Context, ns, name string, cat *Catalog, pkg string, approval v1alpha1.Approval) (*v1alpha1.Subscription, error) {
	sub := &v1alpha1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.SubscriptionSpec{CatalogSource: cat.Name, CatalogSourceNamespace: cat.Namespace,
			Package: pkg, InstallPlanApproval: approval},
	}
	if err := s.Admin.Create(ctx, sub); err != nil {
		return nil, fmt.Errorf("creating Subscription %s/%s: %w", ns, name, err)
	}
	return sub, nil
}

// ApproveInstallPlan sets spec.approved, as a user approving a Manual plan would.
func (s *Sim) ApproveInstallPlan(ctx context.Context, ns, name string) error {
	ip := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return s.Admin.Patch(ctx, ip, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"approved":true}}`)))
}

// Install drives a Subscription until its CSV exists: namespace syncs (unpacking as needed), plan
// execution with approval when approve is set, and CSV syncs. It returns the last plan.
func (s *Sim) Install(ctx context.Context, ns string, approve bool) (*v1alpha1.InstallPlan, error) {
	var last *v1alpha1.InstallPlan
	quiet := 0 // passes in a row that made no plan: OLM requeues after a pass that only moved states
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		// The olm-operator syncs CSVs all the time; like OLM, a write that lost a race (409) is
		// retried on the next pass.
		if err := s.SyncCSVs(ctx, ns); err != nil && !apierrors.IsConflict(err) {
			return false, err
		}
		ip, err := s.SyncNamespace(ctx, ns)
		if err == ErrUnpacking || apierrors.IsConflict(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if ip != nil {
			quiet = 0
			last = ip
			if approve && ip.Spec.Approval == v1alpha1.ApprovalManual && !ip.Spec.Approved {
				if err := s.ApproveInstallPlan(ctx, ns, ip.Name); err != nil {
					return false, err
				}
			}
			if err := s.ExecutePlan(ctx, ns, ip.Name); err != nil && !apierrors.IsConflict(err) {
				return false, err
			}
			return false, nil
		}
		// No new plan: done once every Subscription is at its latest known CSV.
		subs, err := s.listSubscriptions(ctx, ns)
		if err != nil {
			return false, err
		}
		for _, sub := range subs {
			if sub.Status.State != v1alpha1.SubscriptionStateAtLatest {
				if last != nil && last.Spec.Approval == v1alpha1.ApprovalManual && !approve {
					return true, nil // waiting for a human
				}
				return false, nil
			}
		}
		quiet++
		return quiet >= 2, nil
	})
	if err != nil {
		return last, fmt.Errorf("installing in %s: %w", ns, err)
	}
	return last, nil
}

func waitCRDEstablished(ctx context.Context, c client.Client, name string) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, crd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for _, cond := range crd.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func rawJSON(v any) runtime.RawExtension { return runtime.RawExtension{Raw: mustJSON(v)} }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with literal maps
	}
	return b
}
