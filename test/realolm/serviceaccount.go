package realolm

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// OLM #3607: an upgrade's ServiceAccount step rewrites an operator's ServiceAccount into OLM's own
// manifest, dropping what a user put on it.

// What a user puts on an operator's ServiceAccount: EKS IRSA's role annotation, a label and an
// image pull secret.
const (
	SARoleAnnotation = "eks.amazonaws.com/role-arn"
	SARole           = "arn:aws:iam::111122223333:role/alpha-operator"
	SALabel          = "team"
	SAPullSecret     = "registry-credentials"
)

// SAKept is what of the user's metadata is on the ServiceAccount after the upgrade.
type SAKept struct {
	Annotation, Label, PullSecret bool
	// Upgraded is false when stock OLM never got to the upgrade (its stale resolution race).
	Upgraded bool
}

func (k SAKept) String() string {
	return fmt.Sprintf("annotation %v, label %v, imagePullSecret %v", k.Annotation, k.Label, k.PullSecret)
}

// StaleFor is how long a stale resolution failure must last before stock OLM counts as stuck:
// OLM never retries it, so anything well past a resolution's duration would do.
const StaleFor = 30 * time.Second

// ApprovePlanFor waits until the Subscription points at a plan that installs csv and approves it.
// With tolerateStuck, a resolution failure that blames CSVs gone since (drift.StaleResolution)
// and lasts StaleFor returns false instead.
func ApprovePlanFor(ctx context.Context, c client.Client, sub *v1alpha1.Subscription, csv string, tolerateStuck bool) (bool, error) {
	var plan *v1alpha1.InstallPlan
	var staleSince time.Time
	stuck := false
	err := testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		s := &v1alpha1.Subscription{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(sub), s); err != nil {
			return false, err
		}
		if tolerateStuck {
			gone := drift.StaleResolution(s, func(name string) bool {
				return !apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: name}, &v1alpha1.ClusterServiceVersion{}))
			})
			switch {
			case len(gone) == 0:
				staleSince = time.Time{}
			case staleSince.IsZero():
				staleSince = time.Now()
			case time.Since(staleSince) > StaleFor:
				stuck = true
				return true, nil
			}
		}
		if s.Status.InstallPlanRef == nil {
			return false, nil
		}
		p := &v1alpha1.InstallPlan{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Status.InstallPlanRef.Name}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		plan = p
		return slices.Contains(p.Spec.ClusterServiceVersionNames, csv), nil
	})
	switch {
	case err != nil:
		return false, fmt.Errorf("no plan for %s in %s: %w", csv, sub.Namespace, err)
	case stuck:
		return false, nil
	}
	if err := Approve(ctx, c, plan); err != nil {
		return false, fmt.Errorf("approving InstallPlan %s/%s: %w", plan.Namespace, plan.Name, err)
	}
	return true, nil
}

// UpgradeWithUserMetadata installs Alpha v1 (Manual) in a fresh namespace, puts the user's
// metadata on its ServiceAccount, approves the upgrade to v2 (whose plan has a ServiceAccount
// step: the new CSV's ownerReference) and reports what of the metadata is left once v2
// Succeeded. With tolerateStuck (stock OLM), an upgrade that never comes (OLM's stale resolution
// race) returns SAKept{} without an error. logf receives what it saw on the way.
func UpgradeWithUserMetadata(ctx context.Context, c client.Client, prefix string, tolerateStuck bool, logf func(format string, args ...any)) (SAKept, error) {
	ns, err := OperatorNamespace(ctx, c, prefix)
	if err != nil {
		return SAKept{}, err
	}
	v1, v2 := Alpha.CSVName("1.0.0"), Alpha.CSVName("2.0.0")
	sub := NewSubscription(ns, "alpha", Alpha, v1alpha1.ApprovalManual, v1)
	if err := c.Create(ctx, sub); err != nil {
		return SAKept{}, err
	}
	if _, err := ApprovePlanFor(ctx, c, sub, v1, false); err != nil {
		return SAKept{}, err
	}
	if err := CSVSucceeded(ctx, c, ns, v1); err != nil {
		return SAKept{}, err
	}
	sa := &corev1.ServiceAccount{}
	key := client.ObjectKey{Namespace: ns, Name: Alpha.ServiceAccount()}
	if err := c.Get(ctx, key, sa); err != nil {
		return SAKept{}, err
	}
	logf("%s: OLM created ServiceAccount %s with labels %v, owners %d", ns, sa.Name, sa.Labels, len(sa.OwnerReferences))
	// As an administrator's edit does, read and write again when OLM wrote the ServiceAccount in
	// between (seen on OpenShift 4.20 when its olm-operator, then without the ClusterOperator kind
	// served, restarted and synced it again; any resync of the CSV does the same).
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, sa); err != nil {
			return err
		}
		if sa.Annotations == nil {
			sa.Annotations = map[string]string{}
		}
		if sa.Labels == nil {
			sa.Labels = map[string]string{}
		}
		sa.Annotations[SARoleAnnotation], sa.Labels[SALabel] = SARole, "a"
		sa.ImagePullSecrets = append(sa.ImagePullSecrets, corev1.LocalObjectReference{Name: SAPullSecret})
		return c.Update(ctx, sa)
	}); err != nil {
		return SAKept{}, err
	}
	upgraded, err := ApprovePlanFor(ctx, c, sub, v2, tolerateStuck)
	if err != nil {
		return SAKept{}, err
	}
	if !upgraded {
		logf("stock OLM stuck before %s in %s (its stale resolution race): no upgrade to observe", v2, ns)
		return SAKept{}, nil
	}
	if err := CSVSucceeded(ctx, c, ns, v2); err != nil {
		return SAKept{}, err
	}
	if err := c.Get(ctx, key, sa); err != nil {
		return SAKept{}, err
	}
	owned := false
	for _, r := range sa.OwnerReferences {
		owned = owned || r.Kind == "ClusterServiceVersion" && r.Name == v2
	}
	if !owned {
		logf("%s: OLM's ServiceAccount step did not add %s's ownerReference (owners %v)", ns, v2, sa.OwnerReferences)
	}
	k := SAKept{Annotation: sa.Annotations[SARoleAnnotation] == SARole, Label: sa.Labels[SALabel] == "a", Upgraded: true}
	for _, s := range sa.ImagePullSecrets {
		k.PullSecret = k.PullSecret || s.Name == SAPullSecret
	}
	logf("%s after the upgrade to v2: annotations %v, labels %v, imagePullSecrets %v", ns, sa.Annotations, sa.Labels, sa.ImagePullSecrets)
	return k, nil
}
