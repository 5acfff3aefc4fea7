package tier

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/realolm"
)

// TestCopiedCSVsReported replays N4 (OCPBUGS-37982, OLM #2701) on OLM's own operators: an operator
// installed for all namespaces is copied by OLM into every other namespace, and stock OLM says
// nothing of it. `kubectl olmguard doctor` reports the copies (CopiedCSVsMultiply) with OLMConfig's
// disableCopiedCSVs as the fix, and with that fix applied OLM deletes the copies. The OLMConfig
// is set back at the end, since the cluster is shared with TestAllNamespacesInstall.
// Fails before doctor's check: no CopiedCSVsMultiply finding.
func TestCopiedCSVsReported(t *testing.T) {
	declare(t, "N4: copied CSVs reported (OCPBUGS-37982)", false)
	c, o := globalOLM(t)
	ctx := context.Background()
	// TestAllNamespacesInstall installed and removed the same operator in the same global
	// namespace just before; on openshift-4.20 OLM was seen to create its CSV again after that
	// uninstall, and a Subscription then fails resolution on the CSV no Subscription references
	// (OLM #2201). Start from no such CSV.
	global := must(realolm.GlobalOperators(ctx, c.Client, o))(t)
	left := &v1alpha1.ClusterServiceVersion{}
	left.Namespace, left.Name = global, Omega.CSVName(Omega.Versions[0])
	if recreated, err := realolm.DeleteCSV(ctx, c.Client, left); err != nil {
		t.Fatal(err)
	} else if recreated > 0 {
		t.Logf("a CSV %s/%s was left by the test before and recreated %d time(s); deleted", global, left.Name, recreated)
	}
	r := must(realolm.InstallEverywhere(ctx, c.Client, o, Omega))(t)
	t.Logf("stock OLM %s: %d copies of %s/%s, one in each of %d other namespaces", o.Version, r.Copies, r.Namespace, r.CSV, r.Elsewhere)
	disabled := false
	t.Cleanup(func() {
		uninstallEverywhere(t, c.Client, r)
		if disabled {
			setCopiedCSVs(t, c.Client, false)
		}
	})

	if r.Copies < 2 {
		t.Fatalf("OLM made %d copies: too few to report", r.Copies)
	}
	// doctor's --copied-csvs-above just below the copies OLM made here (one per namespace of this
	// small cluster), so that it reports them as it reports 1,000 on a large one (its default).
	above := r.Copies - 1
	code, out, errOut := procs.Doctor(t, ctx, c.Kubeconfig, "-A", "-o", "json", fmt.Sprintf("--copied-csvs-above=%d", above))
	var report doctor.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("doctor -o json (exit %d): %v\n%s\n%s", code, err, out, errOut)
	}
	var found *doctor.Finding
	for i := range report.Findings {
		if report.Findings[i].Check == "CopiedCSVsMultiply" {
			found = &report.Findings[i]
		}
	}
	if found == nil {
		t.Fatalf("doctor reported no CopiedCSVsMultiply with %d copies (above %d): %+v", r.Copies, above, report.Findings)
	}
	if !strings.Contains(found.Fix, "disableCopiedCSVs") {
		t.Errorf("doctor's fix does not name OLMConfig's disableCopiedCSVs: %q", found.Fix)
	}
	t.Logf("doctor: %s -> %s", found.Problem, found.Fix)

	if err := realolm.DisableCopiedCSVs(ctx, c.Client); err != nil {
		t.Fatal(err)
	}
	disabled = true
	if err := realolm.NoCopiesOf(ctx, c.Client, r.Namespace, r.CSV); err != nil {
		t.Errorf("with doctor's fix applied: %v", err)
	}
	checkLogs(t, o)
}

// setCopiedCSVs sets OLMConfig cluster's spec.features.disableCopiedCSVs.
func setCopiedCSVs(t *testing.T, c client.Client, disable bool) {
	cfg := &unstructured.Unstructured{}
	cfg.SetGroupVersionKind(schema.GroupVersionKind{Group: olm.Group, Version: olm.OLMConfigVersion, Kind: olm.OLMConfigKind})
	cfg.SetName(olm.OLMConfigName)
	patch := fmt.Appendf(nil, `{"spec":{"features":{"disableCopiedCSVs":%t}}}`, disable)
	if err := c.Patch(context.Background(), cfg, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Errorf("setting OLMConfig's disableCopiedCSVs back to %t: %v", disable, err)
	}
}

// uninstallEverywhere removes an AllNamespaces install as TestAllNamespacesInstall does: once the
// install has settled, the Subscription, then the CSV once its plans are garbage-collected (and
// again if OLM recreates it), then waits until no copy is left.
func uninstallEverywhere(t *testing.T, c client.Client, r realolm.CopiedEverywhere) {
	ctx := context.Background()
	if err := realolm.SubscriptionAtLatest(ctx, c, r.Namespace, Omega.Name); err != nil {
		// OLM can lose track of the CSV it installed for the Subscription (a status write lost to
		// a conflict; then ResolutionFailed: the CSV "is not referenced by a subscription", OLM
		// #2201, seen on openshift-4.20): the uninstall goes on, it removes both.
		t.Logf("Subscription %s/%s not AtLatestKnown before its uninstall (%v): uninstalling it anyway", r.Namespace, Omega.Name, err)
	}
	if err := realolm.NoPlanInstalling(ctx, c, r.Namespace); err != nil {
		t.Error(err)
	}
	sub := &v1alpha1.Subscription{}
	sub.Namespace, sub.Name = r.Namespace, Omega.Name
	if err := c.Delete(ctx, sub); client.IgnoreNotFound(err) != nil {
		t.Error(err)
	}
	waitPlansGone(t, c, r.Namespace)
	csv := &v1alpha1.ClusterServiceVersion{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: r.Namespace, Name: r.CSV}, csv); err != nil {
		if !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	} else if recreated, err := realolm.DeleteCSV(ctx, c, csv); err != nil {
		t.Error(err)
	} else if recreated > 0 {
		t.Logf("OLM created %s/%s again %d time(s) after its delete; deleted again", r.Namespace, r.CSV, recreated)
	}
	if err := realolm.NoCopiesOf(ctx, c, r.Namespace, r.CSV); err != nil {
		t.Error(err)
	}
}
