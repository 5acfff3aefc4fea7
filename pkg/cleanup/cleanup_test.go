package cleanup

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

func csv(ns, name string, f func(*v1alpha1.ClusterServiceVersion)) v1alpha1.ClusterServiceVersion {
	c := v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if f != nil {
		f(&c)
	}
	return c
}

func sub(ns, name, current, installed string) v1alpha1.Subscription {
	s := v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	s.Status.CurrentCSV, s.Status.InstalledCSV = current, installed
	return s
}

func TestClassify(t *testing.T) {
	v1 := csv("ns", "op.v1", nil)
	tests := []struct {
		name   string
		csv    v1alpha1.ClusterServiceVersion
		others []v1alpha1.ClusterServiceVersion
		subs   []v1alpha1.Subscription
		want   Kind
	}{
		{"alone, no subscription: uninstall", v1, nil, nil, Uninstall},
		{"copied by label", csv("t", "op.v1", func(c *v1alpha1.ClusterServiceVersion) { c.Labels = map[string]string{olm.CopiedFromLabel: "ns"} }), nil, nil, Copied},
		{"copied by reason", csv("t", "op.v1", func(c *v1alpha1.ClusterServiceVersion) { c.Status.Reason = v1alpha1.CSVReasonCopied }), nil, nil, Copied},
		{"replacing", csv("ns", "op.v1", func(c *v1alpha1.ClusterServiceVersion) { c.Status.Phase = v1alpha1.CSVPhaseReplacing }), nil, nil, Upgrade},
		{"deleting", csv("ns", "op.v1", func(c *v1alpha1.ClusterServiceVersion) { c.Status.Phase = v1alpha1.CSVPhaseDeleting }), nil, nil, Upgrade},
		{"reason replaced", csv("ns", "op.v1", func(c *v1alpha1.ClusterServiceVersion) { c.Status.Reason = v1alpha1.CSVReasonReplaced }), nil, nil, Upgrade},
		{"another CSV replaces it", v1, []v1alpha1.ClusterServiceVersion{csv("ns", "op.v2", func(c *v1alpha1.ClusterServiceVersion) { c.Spec.Replaces = "op.v1" })}, nil, Upgrade},
		{"a copy replacing it does not count", v1, []v1alpha1.ClusterServiceVersion{csv("ns", "op.v2", func(c *v1alpha1.ClusterServiceVersion) {
			c.Spec.Replaces = "op.v1"
			c.Labels = map[string]string{olm.CopiedFromLabel: "x"}
		})}, nil, Uninstall},
		{"a CSV in another namespace replacing it does not count", v1, []v1alpha1.ClusterServiceVersion{csv("other", "op.v2", func(c *v1alpha1.ClusterServiceVersion) { c.Spec.Replaces = "op.v1" })}, nil, Uninstall},
		{"subscription installed it: recreated", v1, nil, []v1alpha1.Subscription{sub("ns", "op", "op.v1", "op.v1")}, Recreate},
		{"subscription upgrading to it: recreated", v1, nil, []v1alpha1.Subscription{sub("ns", "op", "op.v1", "")}, Recreate},
		{"subscription in another namespace: uninstall", v1, nil, []v1alpha1.Subscription{sub("other", "op", "op.v1", "op.v1")}, Uninstall},
	}
	for _, tt := range tests {
		if got, why := Classify(&tt.csv, tt.others, tt.subs); got != tt.want || why == "" {
			t.Errorf("%s: Classify = %s (%q), want %s", tt.name, got, why, tt.want)
		}
	}
}

func TestOwned(t *testing.T) {
	full := olm.OwnerLabels("op.v1", "ns")
	tests := []struct {
		name  string
		obj   Object
		other map[string]bool
		want  bool
	}{
		{"three owner labels", Object{Kind: "ClusterRole", Labels: full}, nil, true},
		{"three owner labels, webhook configuration", Object{Kind: "ValidatingWebhookConfiguration", Labels: full}, nil, true},
		{"another namespace's CSV of the same name", Object{Kind: "ClusterRole", Labels: olm.OwnerLabels("op.v1", "other")}, nil, false},
		{"another CSV", Object{Kind: "ClusterRole", Labels: olm.OwnerLabels("op.v2", "ns")}, nil, false},
		{"bundled role, only olm.owner, unambiguous (#2985)", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op.v1", olm.ManagedLabel: "true"}}, nil, true},
		{"bundled binding, only olm.owner", Object{Kind: "ClusterRoleBinding", Labels: map[string]string{olm.OwnerLabel: "op.v1"}}, nil, true},
		{"bundled role, name shared with another CSV: ambiguous", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op.v1"}}, map[string]bool{"op.v1": true}, false},
		{"only olm.owner on a webhook configuration: not ours to judge", Object{Kind: "MutatingWebhookConfiguration", Labels: map[string]string{olm.OwnerLabel: "op.v1"}}, nil, false},
		{"olm.managed only", Object{Kind: "ClusterRole", Labels: map[string]string{olm.ManagedLabel: "true"}}, nil, false},
	}
	for _, tt := range tests {
		if got := Owned(tt.obj, "op.v1", "ns", tt.other); got != tt.want {
			t.Errorf("%s: Owned = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestOrphanedRBAC(t *testing.T) {
	bundled := map[string]string{olm.OwnerLabel: "op.v2", olm.ManagedLabel: "true"}
	tests := []struct {
		name string
		obj  Object
		csvs []string
		want bool
	}{
		{"bundled role whose operator exists nowhere", Object{Kind: "ClusterRole", Labels: bundled}, []string{"other.v2", "opx.v1"}, true},
		{"bundled binding whose operator exists nowhere", Object{Kind: "ClusterRoleBinding", Labels: bundled}, nil, true},
		{"its CSV exists in some namespace", Object{Kind: "ClusterRole", Labels: bundled}, []string{"op.v2"}, false},
		{"another version runs (an upgrade plan failed after relabelling)", Object{Kind: "ClusterRole", Labels: bundled}, []string{"op.v1"}, false},
		{"a name without a version: matched whole", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op", olm.ManagedLabel: "true"}}, []string{"op.v1"}, true},
		{"three owner labels: OLM's own GC removes it", Object{Kind: "ClusterRole", Labels: olm.OwnerLabels("op.v2", "ns")}, nil, false},
		{"not labelled olm.managed: not OLM's", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op.v2"}}, nil, false},
		{"a webhook configuration: not ours to judge", Object{Kind: "ValidatingWebhookConfiguration", Labels: bundled}, nil, false},
	}
	for _, tt := range tests {
		names := CSVNames{}
		for _, n := range tt.csvs {
			names.Add(n)
		}
		if got := OrphanedRBAC(tt.obj, names); got != tt.want {
			t.Errorf("%s: OrphanedRBAC = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestCSVPackage(t *testing.T) {
	for name, want := range map[string]string{"etcd.v0.9.4": "etcd", "my.vault.v1.2.0": "my.vault", "op": "", ".v1": "", "op.vnext": ""} {
		if got, _ := csvPackage(name); got != want {
			t.Errorf("csvPackage(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestAuthReaderDeletable(t *testing.T) {
	me := csv("ns", "op.v1", func(c *v1alpha1.ClusterServiceVersion) {
		c.Spec.WebhookDefinitions = []v1alpha1.WebhookDescription{{DeploymentName: "op-webhook"}}
	})
	mine := []Subject{{Kind: "ServiceAccount", Name: "op-webhook", Namespace: "ns"}}
	successor := csv("ns", "op.v2", func(c *v1alpha1.ClusterServiceVersion) {
		c.Spec.WebhookDefinitions = []v1alpha1.WebhookDescription{{DeploymentName: "op-webhook"}}
	})
	if !ServiceNames(&me)["op-webhook-service"] {
		t.Fatal("service name")
	}
	if !AuthReaderDeletable("op-webhook-service", mine, &me, nil) {
		t.Error("alone: deletable")
	}
	if AuthReaderDeletable("op-webhook-service", mine, &me, []v1alpha1.ClusterServiceVersion{successor}) {
		t.Error("an upgrade's successor still needs it")
	}
	leaving := successor
	leaving.DeletionTimestamp = &metav1.Time{}
	if !AuthReaderDeletable("op-webhook-service", mine, &me, []v1alpha1.ClusterServiceVersion{leaving}) {
		t.Error("the other CSV serving it is being deleted too (an uninstall right after an upgrade): deletable")
	}
	if AuthReaderDeletable("op-webhook-service", []Subject{{Kind: "ServiceAccount", Name: "op-webhook", Namespace: "other"}}, &me, nil) {
		t.Error("a binding for another namespace's service account is not this CSV's")
	}
	if AuthReaderDeletable("op-webhook-service", nil, &me, nil) {
		t.Error("no subjects: leave it")
	}
}

func TestOperandCRDs(t *testing.T) {
	owns := func(names ...string) func(*v1alpha1.ClusterServiceVersion) {
		return func(c *v1alpha1.ClusterServiceVersion) {
			for _, n := range names {
				c.Spec.CustomResourceDefinitions.Owned = append(c.Spec.CustomResourceDefinitions.Owned, v1alpha1.CRDDescription{Name: n, Version: "v1", Kind: "K"})
			}
		}
	}
	me := csv("ns", "op.v1", owns("as.example.com", "bs.example.com"))
	tenant := csv("other", "evil.v1", owns("bs.example.com"))
	copyOfMe := csv("t", "op.v1", func(c *v1alpha1.ClusterServiceVersion) {
		owns("as.example.com")(c)
		c.Labels = map[string]string{olm.CopiedFromLabel: "ns"}
	})
	got := OperandCRDs(&me, []v1alpha1.ClusterServiceVersion{me, tenant, copyOfMe})
	if len(got) != 1 || got[0].Name != "as.example.com" {
		t.Fatalf("OperandCRDs = %v, want only as.example.com (bs is claimed by another CSV too; copies do not count)", got)
	}
}

func TestDeleteOperands(t *testing.T) {
	on := csv("ns", "a", func(c *v1alpha1.ClusterServiceVersion) { c.Spec.Cleanup.Enabled = true })
	off := csv("ns", "a", nil)
	tests := []struct {
		kind Kind
		csv  v1alpha1.ClusterServiceVersion
		mode OperandCleanup
		want bool
	}{
		{Uninstall, on, OperandCleanupOptIn, true},
		{Uninstall, off, OperandCleanupOptIn, false},
		{Uninstall, off, OperandCleanupAlways, true},
		{Uninstall, on, OperandCleanupNever, false},
		{Upgrade, on, OperandCleanupAlways, false},
		{Recreate, on, OperandCleanupAlways, false},
		{Copied, on, OperandCleanupAlways, false},
	}
	for _, tt := range tests {
		if got := DeleteOperands(tt.kind, &tt.csv, tt.mode); got != tt.want {
			t.Errorf("DeleteOperands(%s, enabled=%v, %s) = %v", tt.kind, tt.csv.Spec.Cleanup.Enabled, tt.mode, got)
		}
	}
}

func TestTargetNamespaces(t *testing.T) {
	all := []string{"a", "b", "c"}
	if diff := cmp.Diff(all, TargetNamespaces([]string{""}, all)); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"b"}, TargetNamespaces([]string{"b"}, all)); diff != "" {
		t.Error(diff)
	}
	if got := TargetNamespaces(nil, all); len(got) != 0 {
		t.Errorf("no group status: %v, want none", got)
	}
}
