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
	me := CSVRef{Namespace: "ns", Name: "op.v1", Packages: []string{"op"}}
	services := map[string]bool{"op-webhook-service": true}
	otherNS := []CSVRef{{Namespace: "other", Name: "op.v1", Packages: []string{"op"}}}
	tests := []struct {
		name   string
		obj    Object
		others []CSVRef
		want   bool
	}{
		{"three owner labels", Object{Kind: "ClusterRole", Labels: full}, nil, true},
		{"three owner labels, webhook configuration", Object{Kind: "ValidatingWebhookConfiguration", Labels: full}, nil, true},
		{"three owner labels, named per CSV: goes though the package runs elsewhere", Object{Kind: "ClusterRole", Name: "op.v1-abc", Labels: full}, otherNS, true},
		{"another namespace's CSV of the same name", Object{Kind: "ClusterRole", Labels: olm.OwnerLabels("op.v1", "other")}, nil, false},
		{"another CSV", Object{Kind: "ClusterRole", Labels: olm.OwnerLabels("op.v2", "ns")}, nil, false},
		{"bundled role, only olm.owner, unambiguous (#2985)", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op.v1", olm.ManagedLabel: "true"}}, nil, true},
		{"bundled binding, only olm.owner", Object{Kind: "ClusterRoleBinding", Labels: map[string]string{olm.OwnerLabel: "op.v1"}}, nil, true},
		{"bundled role, name shared with another CSV: still used", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op.v1"}}, otherNS, false},
		{"bundled role, another version runs in another namespace: still used", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op.v1"}},
			[]CSVRef{{Namespace: "a", Name: "op.v0", Packages: []string{"op"}}}, false},
		{"auth-delegator binding relabelled to this CSV, package runs elsewhere: kept", Object{Kind: "ClusterRoleBinding", Name: "op-webhook-service-system:auth-delegator", Labels: full}, otherNS, false},
		{"auth-delegator binding, package nowhere else: deleted", Object{Kind: "ClusterRoleBinding", Name: "op-webhook-service-system:auth-delegator", Labels: full}, nil, true},
		{"APIService, package runs elsewhere: kept", Object{Kind: "APIService", Name: "v1.op.example.com", Labels: full}, otherNS, false},
		{"a copy of the package does not count", Object{Kind: "ClusterRole", Labels: map[string]string{olm.OwnerLabel: "op.v1"}},
			[]CSVRef{{Namespace: "t", Name: "op.v1", Packages: []string{"op"}, Copied: true}}, true},
		{"only olm.owner on a webhook configuration: not ours to judge", Object{Kind: "MutatingWebhookConfiguration", Labels: map[string]string{olm.OwnerLabel: "op.v1"}}, nil, false},
		{"olm.managed only", Object{Kind: "ClusterRole", Labels: map[string]string{olm.ManagedLabel: "true"}}, nil, false},
	}
	for _, tt := range tests {
		if got := Owned(tt.obj, me, NewUsers(tt.others), services); got != tt.want {
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
		var refs []CSVRef
		for _, n := range tt.csvs {
			refs = append(refs, CSVRefOf("ns", n, nil, nil, "", false, nil))
		}
		if got := OrphanedRBAC(tt.obj, NewUsers(refs)); got != tt.want {
			t.Errorf("%s: OrphanedRBAC = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestSharedObjectRule is the one rule of the CSV cleanup (Owned) and the orphan sweep
// (OrphanedRBAC) for a bundled ClusterRole, walked through an uninstall by two tenants: team-a runs
// pkg v1.0.0 in namespace a; team-b installs v2.0.0 in b, and OLM relabels the bundled role
// olm.owner=pkg.v2.0.0 (OLM issue #2985); team-b uninstalls, then team-a.
//
// Fails before the fix: the cleanup of team-b's pkg.v2.0.0 deleted the role through the name-only
// path of Owned (no other CSV is named pkg.v2.0.0), while team-a's pkg.v1.0.0 still ran.
func TestSharedObjectRule(t *testing.T) {
	role := Object{Kind: "ClusterRole", Name: "pkg-reader", Labels: map[string]string{olm.OwnerLabel: "pkg.v2.0.0", olm.ManagedLabel: "true"}}
	props := func(pkg string) map[string]string {
		return map[string]string{PropertiesAnnotation: `{"properties":[{"type":"olm.package","value":{"packageName":"` + pkg + `","version":"1.0.0"}}]}`}
	}
	teamA := CSVRefOf("a", "pkg.v1.0.0", nil, props("pkg"), "", false, nil)
	teamB := CSVRefOf("b", "pkg.v2.0.0", nil, props("pkg"), "", false, nil)
	tests := []struct {
		name       string
		self       *CSVRef // the CSV being cleaned up; nil: the orphan sweep
		csvs       []CSVRef
		wantDelete bool
	}{
		{"team-b uninstalls while team-a's v1 runs: kept", &teamB, []CSVRef{teamA}, false},
		{"the sweep meanwhile: kept", nil, []CSVRef{teamA}, false},
		{"team-a's v1 is being deleted too: it runs this rule itself, so it does not hold the role", &teamB, []CSVRef{deleting(teamA)}, true},
		{"team-a uninstalls later: the sweep deletes the role", nil, nil, true},
		{"only a copy of team-a's CSV is left: deleted", nil, []CSVRef{copied(teamA)}, true},
		{"names without .v, tied by OLM's olm.package property: kept", ptr(CSVRefOf("b", "pkg-2.0.0", nil, props("pkg"), "", false, nil)),
			[]CSVRef{CSVRefOf("a", "pkg-1.0.0", nil, props("pkg"), "", false, nil)}, false},
		{"names without .v, tied by team-a's Subscription: kept", ptr(CSVRefOf("b", "pkg-2.0.0", nil, props("pkg"), "", false, nil)),
			[]CSVRef{CSVRefOf("a", "pkg-1.0.0", nil, nil, "", false, []v1alpha1.Subscription{subPkg("a", "pkg", "pkg-1.0.0")})}, false},
		{"a hostile annotation on the deleted CSV cannot untie the name rule: kept", ptr(CSVRefOf("b", "pkg.v2.0.0", nil, props("elsewhere"), "", false, nil)),
			[]CSVRef{CSVRefOf("a", "pkg.v1.0.0", nil, nil, "", false, nil)}, false},
		{"OLM's copy of team-a's CSV (status.reason Copied) is left: deleted", nil,
			[]CSVRef{CSVRefOf("c", "pkg.v1.0.0", map[string]string{olm.CopiedFromLabel: "a"}, props("pkg"), olm.CopiedReason, false, nil)}, true},
		// Fails before the fix: a CSV a tenant labelled olm.copiedFrom (or annotated with another
		// operator namespace) was taken for a copy and stopped counting, so its uninstall next
		// door, or the sweep, deleted the role it still used (issue 31, items 2 and 7).
		{"team-a labelled its own CSV olm.copiedFrom: still a user, kept", nil,
			[]CSVRef{CSVRefOf("a", "pkg.v1.0.0", map[string]string{olm.CopiedFromLabel: "x"}, props("pkg"), "", false, nil)}, false},
		{"team-a annotated its CSV with another operator namespace: still a user, kept", &teamB,
			[]CSVRef{CSVRefOf("a", "pkg.v1.0.0", nil, map[string]string{olm.OperatorNamespaceAnnotation: "elsewhere"}, "", false, nil)}, false},
		{"another package in another namespace: deleted", &teamB, []CSVRef{CSVRefOf("a", "other.v1.0.0", nil, props("other"), "", false, nil)}, true},
	}
	for _, tt := range tests {
		r := role
		if tt.self != nil {
			r.Labels = map[string]string{olm.OwnerLabel: tt.self.Name, olm.ManagedLabel: "true"}
		}
		var got bool
		if tt.self != nil {
			got = Owned(r, *tt.self, NewUsers(tt.csvs), nil)
		} else {
			got = OrphanedRBAC(r, NewUsers(tt.csvs))
		}
		if got != tt.wantDelete {
			t.Errorf("%s: delete = %v, want %v", tt.name, got, tt.wantDelete)
		}
	}
	// The sweep knows only the role's olm.owner, here a name without ".v": team-a's CSV, tied to the
	// package by OLM's property, still keeps it.
	noV := Object{Kind: "ClusterRole", Name: "pkg-reader", Labels: map[string]string{olm.OwnerLabel: "pkg-2.0.0", olm.ManagedLabel: "true"}}
	if OrphanedRBAC(noV, NewUsers([]CSVRef{CSVRefOf("a", "pkg-1.0.0", nil, props("pkg"), "", false, nil)})) {
		t.Error("the sweep deleted a role labelled pkg-2.0.0 while team-a's pkg-1.0.0 (package pkg) runs")
	}
	if !OrphanedRBAC(noV, NewUsers([]CSVRef{CSVRefOf("a", "pkgx-1.0.0", nil, props("pkgx"), "", false, nil)})) {
		t.Error("the sweep kept a role labelled pkg-2.0.0 for package pkgx")
	}
}

func deleting(c CSVRef) CSVRef { c.Deleting = true; return c }
func copied(c CSVRef) CSVRef   { c.Copied = true; return c }
func ptr(c CSVRef) *CSVRef     { return &c }

func subPkg(ns, pkg, installed string) v1alpha1.Subscription {
	s := sub(ns, pkg, installed, installed)
	s.Spec.Package = pkg
	return s
}

func TestPackagesOf(t *testing.T) {
	props := `{"properties":[{"type":"olm.gvk","value":{"group":"x","kind":"K","version":"v1"}},{"type":"olm.package","value":{"packageName":"etcd","version":"0.9.4"}}]}`
	tests := []struct {
		name  string
		csv   string
		annos map[string]string
		subs  []v1alpha1.Subscription
		want  []string
	}{
		{"name rule only", "etcd.v0.9.4", nil, nil, []string{"etcd"}},
		{"OLM's property first, then the name rule", "etcdoperator.v0.9.4", map[string]string{PropertiesAnnotation: props}, nil, []string{"etcd", "etcdoperator"}},
		{"the Subscription naming it", "etcd-0.9.4", nil, []v1alpha1.Subscription{subPkg("ns", "etcd", "etcd-0.9.4"), subPkg("ns", "other", "other.v1")}, []string{"etcd"}},
		{"a broken annotation is ignored", "etcd.v1", map[string]string{PropertiesAnnotation: "{"}, nil, []string{"etcd"}},
		{"no evidence", "etcd", nil, nil, nil},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, PackagesOf(tt.csv, tt.annos, tt.subs)); diff != "" {
			t.Errorf("%s: PackagesOf (-want +got)\n%s", tt.name, diff)
		}
	}
}

func TestNamePrefixes(t *testing.T) {
	if diff := cmp.Diff([]string{"my", "my.vault", "my.vault.v1", "my.vault.v1.2"}, namePrefixes("my.vault.v1.2.0")); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"pkg", "pkg-2"}, namePrefixes("pkg-2.0")); diff != "" {
		t.Error(diff)
	}
	if got := namePrefixes("op"); len(got) != 0 {
		t.Errorf("namePrefixes(op) = %v", got)
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
	if !AuthReaderDeletable("op-webhook-service", mine, ref(me), Users{}, &me, nil) {
		t.Error("alone: deletable")
	}
	if AuthReaderDeletable("op-webhook-service", mine, ref(me), Users{}, &me, []v1alpha1.ClusterServiceVersion{successor}) {
		t.Error("an upgrade's successor still needs it")
	}
	leaving := successor
	leaving.DeletionTimestamp = &metav1.Time{}
	if !AuthReaderDeletable("op-webhook-service", mine, ref(me), NewUsers([]CSVRef{deleting(ref(leaving))}), &me, []v1alpha1.ClusterServiceVersion{leaving}) {
		t.Error("the other CSV serving it is being deleted too (an uninstall right after an upgrade): deletable")
	}
	if AuthReaderDeletable("op-webhook-service", []Subject{{Kind: "ServiceAccount", Name: "op-webhook", Namespace: "other"}}, ref(me), Users{}, &me, nil) {
		t.Error("a binding for another namespace's service account is not this CSV's")
	}
	if AuthReaderDeletable("op-webhook-service", nil, ref(me), Users{}, &me, nil) {
		t.Error("no subjects: leave it")
	}
	// The binding's name holds no namespace: another namespace running the package shares it.
	if AuthReaderDeletable("op-webhook-service", mine, ref(me), NewUsers([]CSVRef{{Namespace: "a", Name: "op.v0", Packages: []string{"op"}}}), &me, nil) {
		t.Error("another namespace's CSV of the package still uses it")
	}
}

func ref(c v1alpha1.ClusterServiceVersion) CSVRef {
	return CSVRefOf(c.Namespace, c.Name, c.Labels, c.Annotations, string(c.Status.Reason), c.DeletionTimestamp != nil, nil)
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

// TestOLMInstalledCRD: operands are deleted only for CRDs OLM's own objects show it installed for
// the CSV. Fails before the fix: the CSV's spec.customresourcedefinitions.owned alone decided.
func TestOLMInstalledCRD(t *testing.T) {
	step := func(resolving, kind, group, name, status string) *v1alpha1.Step {
		return &v1alpha1.Step{Resolving: resolving, Status: status, Resource: v1alpha1.StepResource{Kind: kind, Group: group, Name: name}}
	}
	plan := func(steps ...*v1alpha1.Step) v1alpha1.InstallPlan {
		p := v1alpha1.InstallPlan{}
		p.Status.Plan = steps
		return p
	}
	const crd = "widgets.example.com"
	alongside := func(v string) map[string]string {
		return map[string]string{InstalledAlongsideAnnotationPrefix + "1f2e": v}
	}
	tests := []struct {
		name  string
		plans []v1alpha1.InstallPlan
		annos map[string]string
		want  bool
	}{
		{"no evidence: a tenant's CSV claiming the CRD", nil, nil, false},
		{"a plan step that created the CRD for this CSV", []v1alpha1.InstallPlan{plan(step("op.v1", "CustomResourceDefinition", "apiextensions.k8s.io", crd, "Created"))}, nil, true},
		{"a plan step that updated an existing CRD for this CSV", []v1alpha1.InstallPlan{plan(nil, step("op.v1", "CustomResourceDefinition", "apiextensions.k8s.io", crd, "Present"))}, nil, true},
		{"a step not applied yet", []v1alpha1.InstallPlan{plan(step("op.v1", "CustomResourceDefinition", "apiextensions.k8s.io", crd, "Unknown"))}, nil, false},
		{"a step for another CSV", []v1alpha1.InstallPlan{plan(step("other.v1", "CustomResourceDefinition", "apiextensions.k8s.io", crd, "Created"))}, nil, false},
		{"a step for another CRD", []v1alpha1.InstallPlan{plan(step("op.v1", "CustomResourceDefinition", "apiextensions.k8s.io", "gadgets.example.com", "Created"))}, nil, false},
		{"a step of another kind named like the CRD", []v1alpha1.InstallPlan{plan(step("op.v1", "ConfigMap", "", crd, "Created"))}, nil, false},
		{"OLM's installed-alongside annotation naming this CSV", nil, alongside("ns/op.v1"), true},
		{"the annotation naming the same CSV name in another namespace", nil, alongside("other/op.v1"), false},
		{"another annotation with that value", nil, map[string]string{"example.com/installed-alongside": "ns/op.v1"}, false},
	}
	for _, tt := range tests {
		fromPlans := map[string]bool{}
		for i := range tt.plans {
			PlanCRDs(&tt.plans[i], "op.v1", fromPlans)
		}
		if got := OLMInstalledCRD(crd, tt.annos, "ns", "op.v1", fromPlans); got != tt.want {
			t.Errorf("%s: OLMInstalledCRD = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestPlannedBundleRBAC: a bundle-manifest ClusterRole or binding OLM created once, labelled
// olm.managed alone (OLM #2985), belongs to the CSV whose plan step applied it, and to no other;
// an object carrying any owner label goes by Owned instead. Fails before the fix: nothing tied such
// an object to its CSV and it outlived every uninstall.
func TestPlannedBundleRBAC(t *testing.T) {
	step := func(resolving, kind, group, name, status string) *v1alpha1.Step {
		return &v1alpha1.Step{Resolving: resolving, Status: status, Resource: v1alpha1.StepResource{Kind: kind, Group: group, Name: name}}
	}
	const rbac = "rbac.authorization.k8s.io"
	managed := map[string]string{olm.ManagedLabel: olm.ManagedLabelValue}
	self := CSVRef{Namespace: "ns", Name: "op.v1", Packages: []string{"op"}}
	tests := []struct {
		name   string
		step   *v1alpha1.Step
		object Object
		others []CSVRef
		want   bool
	}{
		{"a ClusterRole OLM created for this CSV", step("op.v1", "ClusterRole", rbac, "op-reader", "Created"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: managed}, nil, true},
		{"a ClusterRoleBinding OLM created for this CSV", step("op.v1", "ClusterRoleBinding", rbac, "op-reader", "Created"),
			Object{Kind: "ClusterRoleBinding", Name: "op-reader", Labels: managed}, nil, true},
		{"a step not applied yet", step("op.v1", "ClusterRole", rbac, "op-reader", "Unknown"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: managed}, nil, false},
		{"a step for another CSV", step("other.v1", "ClusterRole", rbac, "op-reader", "Created"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: managed}, nil, false},
		{"a step of another group", step("op.v1", "ClusterRole", "example.com", "op-reader", "Created"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: managed}, nil, false},
		{"an object OLM does not manage (created by an administrator since)", step("op.v1", "ClusterRole", rbac, "op-reader", "Created"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: map[string]string{}}, nil, false},
		{"an object labelled for another CSV since (OLM relabels on another install, #2985)", step("op.v1", "ClusterRole", rbac, "op-reader", "Created"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: map[string]string{olm.ManagedLabel: "true", olm.OwnerLabel: "op.v2"}}, nil, false},
		{"an object labelled as a clusterPermissions role (goes by Owned)", step("op.v1", "ClusterRole", rbac, "op.v1-abc", "Created"),
			Object{Kind: "ClusterRole", Name: "op.v1-abc", Labels: map[string]string{olm.ManagedLabel: "true", olm.OwnerNamespaceLabel: "ns", olm.OwnerKindLabel: olm.ClusterServiceVersionKind}}, nil, false},
		{"another namespace's CSV of the package still uses it", step("op.v1", "ClusterRole", rbac, "op-reader", "Created"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: managed}, []CSVRef{{Namespace: "team-b", Name: "op.v1", Packages: []string{"op"}}}, false},
		{"another package's CSV elsewhere does not keep it", step("op.v1", "ClusterRole", rbac, "op-reader", "Created"),
			Object{Kind: "ClusterRole", Name: "op-reader", Labels: managed}, []CSVRef{{Namespace: "team-b", Name: "other.v1", Packages: []string{"other"}}}, true},
	}
	for _, tt := range tests {
		plan := v1alpha1.InstallPlan{}
		plan.Status.Plan = []*v1alpha1.Step{nil, tt.step}
		planned := map[StepObject]bool{}
		PlanBundleRBAC(&plan, self.Name, planned)
		got := planned[StepObject{Kind: tt.object.Kind, Name: tt.object.Name}] && OwnedByPlanStep(tt.object, self, NewUsers(tt.others))
		if got != tt.want {
			t.Errorf("%s: planned %v, owned = %v, want %v", tt.name, planned, got, tt.want)
		}
	}
}
