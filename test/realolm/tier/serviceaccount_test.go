package tier

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
)

// What a user puts on an operator's ServiceAccount: EKS IRSA's role annotation, a label and an
// image pull secret.
const (
	saRoleAnnotation = "eks.amazonaws.com/role-arn"
	saRole           = "arn:aws:iam::111122223333:role/alpha-operator"
	saLabel          = "team"
	saPullSecret     = "registry-credentials"
)

// saKept is what of the user's metadata is on the ServiceAccount after the upgrade.
type saKept struct {
	Annotation, Label, PullSecret bool
	// Upgraded is false when stock OLM never got to the upgrade (its stale resolution race).
	Upgraded bool
}

func (k saKept) String() string {
	return fmt.Sprintf("annotation %v, label %v, imagePullSecret %v", k.Annotation, k.Label, k.PullSecret)
}

// upgradeWithUserMetadata installs Alpha v1 (Manual), puts the user's metadata on its
// ServiceAccount, approves the upgrade to v2 (whose plan has a ServiceAccount step: the new CSV's
// ownerReference) and reports what of the metadata is left once v2 Succeeded.
func upgradeWithUserMetadata(t *testing.T, c *cluster.Cluster, prefix string, stock bool) saKept {
	t.Helper()
	ctx := context.Background()
	ns := operatorNamespace(t, c, prefix)
	sub := subscribe(t, c, ns, "alpha", realolm.Alpha, v1alpha1.ApprovalManual, realolm.Alpha.CSVName("1.0.0"))
	if !approvePlanFor(t, c, sub, realolm.Alpha.CSVName("1.0.0"), false) {
		t.Fatalf("no plan for %s", realolm.Alpha.CSVName("1.0.0"))
	}
	waitCSV(t, c, ns, realolm.Alpha.CSVName("1.0.0"))
	sa := &corev1.ServiceAccount{}
	key := client.ObjectKey{Namespace: ns, Name: realolm.Alpha.ServiceAccount()}
	if err := c.Client.Get(ctx, key, sa); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: OLM created ServiceAccount %s with labels %v, owners %d", ns, sa.Name, sa.Labels, len(sa.OwnerReferences))
	if sa.Annotations == nil {
		sa.Annotations = map[string]string{}
	}
	if sa.Labels == nil {
		sa.Labels = map[string]string{}
	}
	sa.Annotations[saRoleAnnotation], sa.Labels[saLabel] = saRole, "a"
	sa.ImagePullSecrets = append(sa.ImagePullSecrets, corev1.LocalObjectReference{Name: saPullSecret})
	if err := c.Client.Update(ctx, sa); err != nil {
		t.Fatal(err)
	}
	if !approvePlanFor(t, c, sub, realolm.Alpha.CSVName("2.0.0"), stock) {
		t.Logf("stock OLM stuck before %s in %s (its stale resolution race): no upgrade to observe", realolm.Alpha.CSVName("2.0.0"), ns)
		return saKept{}
	}
	waitCSV(t, c, ns, realolm.Alpha.CSVName("2.0.0"))
	if err := c.Client.Get(ctx, key, sa); err != nil {
		t.Fatal(err)
	}
	owned := false
	for _, r := range sa.OwnerReferences {
		owned = owned || r.Kind == "ClusterServiceVersion" && r.Name == realolm.Alpha.CSVName("2.0.0")
	}
	if !owned {
		t.Logf("%s: OLM's ServiceAccount step did not add %s's ownerReference (owners %v)", ns, realolm.Alpha.CSVName("2.0.0"), sa.OwnerReferences)
	}
	k := saKept{Annotation: sa.Annotations[saRoleAnnotation] == saRole, Label: sa.Labels[saLabel] == "a", Upgraded: true}
	for _, s := range sa.ImagePullSecrets {
		k.PullSecret = k.PullSecret || s.Name == saPullSecret
	}
	t.Logf("%s after the upgrade to v2: annotations %v, labels %v, imagePullSecrets %v", ns, sa.Annotations, sa.Labels, sa.ImagePullSecrets)
	return k
}

// serviceAccountScenario runs the upgrade on stock OLM, reports what stock kept, then with
// olmguard, and asserts that olmguard kept everything. wantStockDrops is what the OLM under test
// is known to drop (olm-facts N2), reported when stock kept it after all.
func serviceAccountScenario(t *testing.T, c *cluster.Cluster, version, prefix string, wantStockDrops saKept) {
	stock := upgradeWithUserMetadata(t, c, prefix+"-stock", true)
	switch {
	case !stock.Upgraded:
		t.Logf("OLM %s stock: the upgrade did not run this time, nothing to compare", version)
	case wantStockDrops.Annotation && stock.Annotation || wantStockDrops.Label && stock.Label || wantStockDrops.PullSecret && stock.PullSecret:
		t.Logf("OLM %s stock kept more than olm-facts N2 says it drops (%s): the drop was not reproduced this run", version, stock)
	default:
		t.Logf("OLM %s stock after an upgrade: %s (OLM's step dropped what olm-facts N2 says it drops)", version, stock)
	}
	runOlmguard(t, c)
	guarded := upgradeWithUserMetadata(t, c, prefix+"-olmguard", false)
	if !guarded.Annotation || !guarded.Label || !guarded.PullSecret {
		t.Errorf("OLM %s with olmguard after an upgrade: %s; want all kept", version, guarded)
	}
}

// stockDrops is what OLM version drops from an operator's ServiceAccount on an upgrade (olm-facts
// N2): every annotation too before the fix of #3607 (v0.33.0 upstream, OpenShift 4.20).
func stockDrops(version string) saKept {
	drops := saKept{Label: true, PullSecret: true}
	if version == "openshift-4.16" || version == "openshift-4.18" {
		drops.Annotation = true
	}
	return drops
}

// TestServiceAccountMetadataKeptOnUpgrade replays OLM #3607 on OLM's own binaries: a user annotates
// (EKS IRSA's role), labels and adds a pull secret to an operator's ServiceAccount; an upgrade's
// ServiceAccount step rewrites it. OLM v0.28.0 (before the fix in v0.33.0) removes every
// annotation, labels and pull secrets; v0.46.0 still removes the label and the pull secret. Stock
// is reported; with olmguard all three are asserted kept.
// Fails before the fix: nothing served ServiceAccount updates, so olmguard's round lost them too.
func TestServiceAccountMetadataKeptOnUpgrade(t *testing.T) {
	declare(t, "N2: ServiceAccount metadata kept (#3607)", true)
	t.Run(realolm.OLMAfter+" (before the fix)", func(t *testing.T) {
		if version() != realolm.Version {
			skipf(t, "starts its own cluster with OLM %s beside the tier's %s; OLM under test is %s", realolm.OLMAfter, realolm.Version, version())
		}
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		c := must(cluster.Start(ctx, cluster.Options{Name: fmt.Sprintf("olmguard-realolm-%d-sa", os.Getpid()), Nodes: 1}))(t)
		t.Cleanup(func() { _ = c.Stop() })
		o := must(realolm.StartOLM(ctx, c, realolm.OLMAfter, realolm.Alpha))(t)
		t.Cleanup(o.Stop)
		serviceAccountScenario(t, c, realolm.OLMAfter, "sa028", saKept{Annotation: true, Label: true, PullSecret: true})
	})
	t.Run("tier's OLM", func(t *testing.T) {
		t.Parallel()
		c, o := realOLM(t)
		serviceAccountScenario(t, c, o.Version, "sa", stockDrops(o.Version))
		checkLogs(t, o)
	})
}
