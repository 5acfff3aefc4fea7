package doctor

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/owners"
	"github.com/olmguard/olmguard/pkg/unpack"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }

// checks lists the findings' classes, checks and objects, and checks their commands
// (AssertCommands).
func checks(t testing.TB, fs []Finding) string {
	t.Helper()
	AssertCommands(t, fs)
	var s []string
	for _, f := range fs {
		s = append(s, string(f.Class)+":"+f.Check+":"+f.Namespace+"/"+f.Name)
	}
	return strings.Join(s, ",")
}

func subscription(name, uid, plan string, state v1alpha1.SubscriptionState, conds ...v1alpha1.SubscriptionCondition) v1alpha1.Subscription {
	s := v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)},
		Status: v1alpha1.SubscriptionStatus{State: state, Conditions: conds}}
	if plan != "" {
		s.Status.InstallPlanRef = &corev1.ObjectReference{Name: plan}
	}
	return s
}

func installPlan(name string, phase v1alpha1.InstallPlanPhase, ownerNames ...string) v1alpha1.InstallPlan {
	ip := v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid")},
		Status: v1alpha1.InstallPlanStatus{Phase: phase, Plan: []*v1alpha1.Step{{Resolving: "x"}}}}
	for _, o := range ownerNames {
		ip.OwnerReferences = append(ip.OwnerReferences, owners.SubscriptionOwnerRef(o, types.UID(o+"-uid")))
	}
	return ip
}

func TestCheckInstallPlans(t *testing.T) {
	subs := []v1alpha1.Subscription{subscription("alpha", "alpha-uid", "install-2", ""), subscription("beta", "beta-uid", "install-2", "")}
	unpopulated := installPlan("install-3", "")
	unpopulated.Status.Plan = nil
	plans := []v1alpha1.InstallPlan{
		installPlan("install-1", v1alpha1.InstallPlanPhaseComplete, "alpha"), // referenced by nobody now: fine
		installPlan("install-2", v1alpha1.InstallPlanPhaseComplete, "alpha"), // beta uses it, not an owner
		unpopulated,
	}
	got := CheckInstallPlans(pointers(plans), pointers(subs))
	if c := checks(t, got); c != "F1:PlanMissingOwner:ns/install-2" {
		t.Fatalf("findings %s", c)
	}
	if !strings.Contains(got[0].Problem, "Subscription beta uses this plan") || strings.Contains(got[0].Problem, "alpha") {
		t.Errorf("problem %q should name beta only", got[0].Problem)
	}
	plans[1] = installPlan("install-2", v1alpha1.InstallPlanPhaseComplete, "alpha", "beta")
	if c := checks(t, CheckInstallPlans(pointers(plans), pointers(subs))); c != "" {
		t.Errorf("owned plan reported: %s", c)
	}
}

func TestCheckSubscriptions(t *testing.T) {
	pending := func(r string) v1alpha1.SubscriptionCondition {
		return v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionInstallPlanPending, Status: corev1.ConditionTrue, Reason: r}
	}
	plans := []v1alpha1.InstallPlan{installPlan("install-1", v1alpha1.InstallPlanPhaseComplete, "ok", "stale"),
		installPlan("install-2", v1alpha1.InstallPlanPhaseComplete, "other")}
	subs := []v1alpha1.Subscription{
		subscription("new", "new-uid", "", ""),
		subscription("ok", "ok-uid", "install-1", v1alpha1.SubscriptionStateAtLatest),
		subscription("stale", "stale-uid", "install-1", v1alpha1.SubscriptionStateAtLatest, pending("Installing")),
		subscription("orphan", "orphan-uid", "install-2", v1alpha1.SubscriptionStateAtLatest, pending("RequiresApproval")),
		subscription("missing", "missing-uid", "install-9", v1alpha1.SubscriptionStateAtLatest),
	}
	got := CheckSubscriptions(pointers(subs), pointers(plans), now)
	if c := checks(t, got); c != "F2:SubscriptionDrift:ns/stale,F2:SubscriptionDrift:ns/orphan,F2:SubscriptionDrift:ns/missing" {
		t.Fatalf("findings %s", c)
	}
	if strings.Contains(got[0].Problem, "(F1)") || !strings.Contains(got[1].Problem, "does not list this Subscription as owner") {
		t.Errorf("only orphan's plan lacks its owner: %q / %q", got[0].Problem, got[1].Problem)
	}
	if !strings.Contains(got[2].Problem, "install-9 does not exist") || !slices.Equal(got[0].Commands, []string{"kubectl -n ns annotate subscription stale " + olmguard.ResyncAnnotation + "=1795262400 --overwrite"}) {
		t.Errorf("problem %q, commands %q", got[2].Problem, got[0].Commands)
	}
}

func TestCheckCSVs(t *testing.T) {
	csv := func(name string, mod func(*CSV)) CSV {
		c := CSV{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Finalizers: []string{olmguard.CleanupFinalizer}}}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	csvs := []CSV{
		csv("guarded", nil),
		csv("bare", func(c *CSV) { c.Finalizers = nil }),
		csv("copy", func(c *CSV) { c.Finalizers = nil; c.Labels = map[string]string{olm.CopiedFromLabel: "ops"} }),
		csv("opted-out", func(c *CSV) {
			c.Finalizers = nil
			c.Annotations = map[string]string{olmguard.CleanupAnnotation: olmguard.CleanupDisabled}
		}),
		csv("stuck", func(c *CSV) { c.DeletionTimestamp = ago(10 * time.Minute) }),
		csv("stuck-on-olm", func(c *CSV) {
			c.DeletionTimestamp = ago(10 * time.Minute)
			c.Finalizers = []string{"operators.coreos.com/csv-cleanup"}
		}),
		csv("deleting", func(c *CSV) { c.DeletionTimestamp = ago(time.Minute) }),
	}
	got := CheckCSVs(csvs, now, 5*time.Minute)
	if c := checks(t, got); c != "F3:CSVWithoutCleanupFinalizer:ns/bare,F3:CSVStuckTerminating:ns/stuck,F3:CSVStuckTerminating:ns/stuck-on-olm" {
		t.Fatalf("findings %s", c)
	}
	if !strings.Contains(got[1].Fix, "kubectl olmguard uninstall") || strings.Contains(got[2].Fix, "olmguard uninstall") {
		t.Errorf("fixes: %q / %q", got[1].Fix, got[2].Fix)
	}

	// A cluster without olmguard: one finding for all its CSVs, not one per CSV.
	var stock []CSV
	for _, name := range []string{"a", "b", "c"} {
		stock = append(stock, csv(name, func(c *CSV) { c.Finalizers = []string{"operators.coreos.com/csv-cleanup"} }))
	}
	got = CheckCSVs(stock, now, 5*time.Minute)
	if c := checks(t, got); c != "F3:OlmguardNotRunning:/" || !strings.Contains(got[0].Problem, "none of the 3 CSVs") {
		t.Fatalf("stock cluster: findings %s (%+v)", c, got)
	}
}

// olmConfigMap is one of OLM's bundle unpack ConfigMaps as the catalog-operator writes it, in its
// catalog's namespace olm.
func olmConfigMap(name string) corev1.ConfigMap {
	const ns = "olm"
	return corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name + "-uid"),
		Labels:          map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: "cat", UID: "cat-uid"}}}}
}

// configMapRef is the ownerReference OLM gives an unpack Job: to its ConfigMap, with its UID.
func configMapRef(ns, name string) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: name, UID: types.UID(ns + "/" + name + "-uid")}
}

// unpackConfigMaps is Audit's lookup, over the ConfigMaps given instead of the cluster's.
func unpackConfigMaps(cms ...corev1.ConfigMap) UnpackConfigMaps {
	return func(ns string, ref metav1.OwnerReference) bool {
		for i := range cms {
			if cms[i].Namespace == ns && unpack.IsUnpackOwner(&cms[i], ref) {
				return true
			}
		}
		return false
	}
}

func TestCheckUnpackJobs(t *testing.T) {
	job := func(name string, labels map[string]string, ref metav1.OwnerReference) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: name, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{ref}}}
	}
	abc := configMapRef("olm", "abc")
	visible := map[string]string{olm.ManagedLabel: "true", olm.BundleUnpackRefLabel: "abc"}
	otherUID, otherGroup := abc, abc
	otherUID.UID = "someone-else"
	otherGroup.APIVersion = "evil.example.com/v1"
	jobs := []batchv1.Job{
		job("ou-123", visible, abc),
		job("abc", nil, abc), // legacy hash-named Job: #3210
		job("ou-456", map[string]string{olm.BundleUnpackRefLabel: "abc"}, abc), // not olm.managed
		job("mine", nil, configMapRef("olm", "user-cm")),                       // owned by someone else's ConfigMap
		job("wrong-uid", nil, otherUID),                                        // names OLM's ConfigMap, not its UID
		job("wrong-group", nil, otherGroup),                                    // kind ConfigMap of another group
		{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: "plain"}},
	}
	user := olmConfigMap("user-cm")
	user.Labels = nil
	got := CheckUnpackJobs(jobs, unpackConfigMaps(olmConfigMap("abc"), user))
	if c := checks(t, got); c != "F4:UnpackJobNameConflict:olm/abc,F4:UnpackJobInvisible:olm/ou-456" {
		t.Fatalf("findings %s", c)
	}
	if !strings.Contains(got[0].Problem, "already exists") || !slices.Equal(got[1].Commands, []string{"kubectl -n olm delete job ou-456"}) {
		t.Errorf("problem %q, commands %q", got[0].Problem, got[1].Commands)
	}
}

func TestCheckCatalogPods(t *testing.T) {
	node := func(name string, ready corev1.ConditionStatus) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}}}
	}
	pod := func(name, nodeName string, catalog bool, deleted *metav1.Time) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: name, DeletionTimestamp: deleted}, Spec: corev1.PodSpec{NodeName: nodeName}}
		if catalog {
			p.Labels = map[string]string{olm.CatalogSourceLabel: "ops"}
		}
		return p
	}
	nodes := []corev1.Node{node("good", corev1.ConditionTrue), node("bad", corev1.ConditionUnknown)}
	pods := []corev1.Pod{
		pod("healthy", "good", true, nil),
		pod("on-bad", "bad", true, nil),
		pod("on-gone", "gone", true, nil),
		pod("not-catalog", "bad", false, nil),
		pod("unscheduled", "", true, nil),
		pod("stuck", "good", true, ago(10*time.Minute)),
		pod("terminating", "good", true, ago(10*time.Second)),
	}
	got := CheckCatalogPods(pods, nodes, now, 5*time.Minute, nil)
	if c := checks(t, got); c != "F5:CatalogPodNodeNotReady:olm/on-bad,F5:CatalogPodNodeGone:olm/on-gone,F5:CatalogPodStuckTerminating:olm/stuck" {
		t.Fatalf("findings %s", c)
	}
}

// A pod a tenant labelled olm.catalogSource is no F5 finding: olmguard's controller leaves it
// alone, so "olmguard heals it" (and the OlmguardFailureNotHealed alert after 30 min) would be
// false. Fails before the fix: every labelled pod on a NotReady node was reported as F5.
func TestCheckCatalogPodsOnlyOwned(t *testing.T) {
	cs := v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: "ops", UID: "ops-uid"}}
	bad := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	pod := func(name string, owner types.UID) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: name, Labels: map[string]string{olm.CatalogSourceLabel: "ops"}}, Spec: corev1.PodSpec{NodeName: "bad"}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: "ops", UID: owner}}
		}
		return p
	}
	pods := []corev1.Pod{pod("real", "ops-uid"), pod("label-only", ""), pod("forged", "forged-uid")}
	got := CheckCatalogPods(pods, []corev1.Node{bad}, now, 5*time.Minute, CatalogPodOwned([]v1alpha1.CatalogSource{cs}, true))
	if c := checks(t, got); c != "F5:CatalogPodNodeNotReady:olm/real" {
		t.Fatalf("findings %s", c)
	}
	// CatalogSources unreadable: an ownerReference to a CatalogSource is enough.
	got = CheckCatalogPods(pods, []corev1.Node{bad}, now, 5*time.Minute, CatalogPodOwned(nil, false))
	if c := checks(t, got); c != "F5:CatalogPodNodeNotReady:olm/real,F5:CatalogPodNodeNotReady:olm/forged" {
		t.Fatalf("findings without CatalogSources %s", c)
	}
}

// A catalog pod in a terminal phase is an F5 finding on any node, the controller's rule: OLM keeps
// it as its registry server (OLM #3459, #3519, OCPBUGS-46474). A tenant's Failed look-alike is
// none. Fails before the fix: no finding for the Failed pods on the Ready node or unscheduled.
func TestCheckCatalogPodsTerminal(t *testing.T) {
	cs := v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: "ops", UID: "ops-uid"}}
	good := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "good"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	pod := func(name, node string, owner types.UID, phase corev1.PodPhase) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: name, Labels: map[string]string{olm.CatalogSourceLabel: "ops"}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		if phase == corev1.PodFailed {
			p.Status.Reason, p.Status.Message = "Evicted", "The node was low on resource: memory."
		}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: "ops", UID: owner}}
		}
		return p
	}
	pods := []corev1.Pod{
		pod("evicted", "good", "ops-uid", corev1.PodFailed),
		pod("unscheduled", "", "ops-uid", corev1.PodFailed),
		pod("running", "good", "ops-uid", corev1.PodRunning),
		pod("look-alike", "good", "", corev1.PodFailed),
		pod("forged", "good", "forged-uid", corev1.PodFailed),
	}
	got := CheckCatalogPods(pods, []corev1.Node{good}, now, 5*time.Minute, CatalogPodOwned([]v1alpha1.CatalogSource{cs}, true))
	if c := checks(t, got); c != "F5:CatalogPodFailed:olm/evicted,F5:CatalogPodFailed:olm/unscheduled" {
		t.Fatalf("findings %s", c)
	}
	f := got[0]
	if f.Evidence != "phase Failed, reason Evicted: The node was low on resource: memory." || !strings.Contains(f.Problem, "on node good") ||
		!slices.Equal(f.Commands, []string{"kubectl -n olm delete pod evicted --force --grace-period=0"}) {
		t.Errorf("finding %+v", f)
	}
}

func TestSortAndTable(t *testing.T) {
	fs := []Finding{{Class: F5, Kind: "Pod", Namespace: "b", Name: "p", Problem: "x", Fix: "y"},
		{Class: F1, Kind: "InstallPlan", Namespace: "a", Name: "ip", Problem: "multi\nline", Fix: "z"}}
	Sort(fs)
	if fs[0].Class != F1 {
		t.Fatalf("not sorted: %v", fs)
	}
	var b strings.Builder
	if err := WriteTable(&b, &Report{Findings: fs, Checked: map[string]int{"Pods": 2}}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"CLASS", "installplan/ip", "multi line", "2 problem(s) found (F1: 1, F5: 1); checked 2 Pods."} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	_ = WriteTable(&b, &Report{Checked: map[string]int{"Pods": 2}})
	if b.String() != "No problems found (checked 2 Pods).\n" {
		t.Errorf("healthy table %q", b.String())
	}
	b.Reset()
	_ = WriteJSON(&b, &Report{Checked: map[string]int{}})
	if !strings.Contains(b.String(), `"findings": []`) {
		t.Errorf("json of a healthy report must hold an empty list: %s", b.String())
	}
}

// TestCheckOrphanCSVs: a CSV no Subscription of its namespace has installed is reported, beside
// other operators' Subscriptions too (the recreated CSV of an uninstall in a global namespace: the
// rows "beside another operator's Subscription" fail when any Subscription in the namespace
// counts); installs and upgrades in progress are not.
func TestCheckOrphanCSVs(t *testing.T) {
	csv := func(ns, name, replaces string, mod func(*v1alpha1.ClusterServiceVersion)) v1alpha1.ClusterServiceVersion {
		c := v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		c.Spec.Replaces = replaces
		if mod != nil {
			mod(&c)
		}
		return c
	}
	sub := func(name, installed, current string) v1alpha1.Subscription {
		s := v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: name}}
		s.Status.InstalledCSV, s.Status.CurrentCSV = installed, current
		return s
	}
	blamed := strings.ReplaceAll(orphanMessage, "@existing/ns//beta", "@existing/ops//beta")
	subs := []v1alpha1.Subscription{
		sub("alpha", "alpha.v1", "alpha.v1"),       // installed
		sub("gamma", "", "gamma.v1"),               // being installed: OLM sets installedCSV once the CSV exists
		sub("delta", "delta.v1", "delta.v2"),       // upgrading: delta.v2 replaces delta.v1
		sub("epsilon", "epsilon.v2", "epsilon.v2"), // upgraded: epsilon.v1 goes once epsilon.v2 succeeds
		resolutionFailed(sub("beta-again", "", ""), "ConstraintsNotSatisfiable", blamed),
	}
	tests := []struct {
		name string
		csvs []v1alpha1.ClusterServiceVersion
		want string
	}{
		{"installed by a Subscription", []v1alpha1.ClusterServiceVersion{csv("ops", "alpha.v1", "", nil)}, ""},
		{"beside another operator's Subscription", []v1alpha1.ClusterServiceVersion{csv("ops", "left.v1", "", nil)}, "F3:CSVWithoutSubscription:ops/left.v1"},
		{"an older version of an installed operator, not being replaced", []v1alpha1.ClusterServiceVersion{csv("ops", "alpha.v0", "", nil)}, "F3:CSVWithoutSubscription:ops/alpha.v0"},
		{"named by a Subscription of another namespace", []v1alpha1.ClusterServiceVersion{csv("other", "alpha.v1", "", nil)}, "F3:CSVWithoutSubscription:other/alpha.v1"},
		{"in a namespace without Subscriptions", []v1alpha1.ClusterServiceVersion{csv("left", "a.v2", "", nil)}, "F3:CSVWithoutSubscription:left/a.v2"},
		{"being installed", []v1alpha1.ClusterServiceVersion{csv("ops", "gamma.v1", "", nil)}, ""},
		{"an upgrade in progress", []v1alpha1.ClusterServiceVersion{csv("ops", "delta.v1", "", nil), csv("ops", "delta.v2", "delta.v1", nil)}, ""},
		{"replaced by the installed version", []v1alpha1.ClusterServiceVersion{csv("ops", "epsilon.v1", "", nil), csv("ops", "epsilon.v2", "epsilon.v1", nil)}, ""},
		{"replaced by a CSV no Subscription names: both left by an uninstall during an upgrade",
			[]v1alpha1.ClusterServiceVersion{csv("left", "a.v1", "", nil), csv("left", "a.v2", "a.v1", nil)},
			"F3:CSVWithoutSubscription:left/a.v1,F3:CSVWithoutSubscription:left/a.v2"},
		{"blamed by a failed resolution (CheckBlockingCSVs reports it)", []v1alpha1.ClusterServiceVersion{csv("ops", "beta.v1.0.0", "", nil)}, ""},
		{"being deleted", []v1alpha1.ClusterServiceVersion{csv("left", "a.v1", "", func(c *v1alpha1.ClusterServiceVersion) { c.DeletionTimestamp = ago(time.Second) })}, ""},
		{"a copy in a target namespace", []v1alpha1.ClusterServiceVersion{csv("left", "a.v2", "", func(c *v1alpha1.ClusterServiceVersion) {
			c.Labels = map[string]string{olm.CopiedFromLabel: "ops"}
		})}, ""},
		{"OLM's own packageserver", []v1alpha1.ClusterServiceVersion{csv("olm", "packageserver", "", func(c *v1alpha1.ClusterServiceVersion) {
			c.Labels = map[string]string{"olm.version": "v0.46.0"}
		})}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckOrphanCSVs(tt.csvs, pointers(subs))
			if c := checks(t, got); c != tt.want {
				t.Fatalf("findings %q, want %q", c, tt.want)
			}
			for _, f := range got {
				if want := []string{"kubectl -n " + f.Namespace + " delete csv " + f.Name}; !slices.Equal(f.Commands, want) {
					t.Errorf("commands %q do not say how to remove it: want %q", f.Commands, want)
				}
			}
		})
	}
}

// TestTrimCSVKeepsOnlyWhatChecksRead: fails when doctor keeps every annotation (a 40 KB
// alm-examples on each of 20,000 CSVs is 800 MB) or drops one a check reads.
func TestTrimCSVKeepsOnlyWhatChecksRead(t *testing.T) {
	c := v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: "a.v1", Namespace: "ns",
		Labels: map[string]string{olm.CopiedFromLabel: "ops"},
		Annotations: map[string]string{"alm-examples": strings.Repeat("x", 40<<10), olm.OperatorNamespaceAnnotation: "ops",
			olmguard.CleanupAnnotation: olmguard.CleanupDisabled, "example.com/other": "y"}},
		Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: "a", Replaces: "a.v0"}}
	got := TrimCSV(c)
	want := map[string]string{olm.OperatorNamespaceAnnotation: "ops", olmguard.CleanupAnnotation: olmguard.CleanupDisabled}
	if !reflect.DeepEqual(got.Annotations, want) {
		t.Errorf("annotations %v, want %v", got.Annotations, want)
	}
	if got.Spec.DisplayName != "" || got.Spec.Replaces != "a.v0" || got.Labels[olm.CopiedFromLabel] != "ops" || got.Name != "a.v1" {
		t.Errorf("trimmed CSV %+v, spec %+v: want of the spec only replaces, labels and name kept", got.ObjectMeta, got.Spec)
	}
}

// TestTrimInstallPlanAndSubscription: fails when an audit keeps managed fields, annotations or
// steps of every plan and Subscription it lists, or loses that a plan is populated.
func TestTrimInstallPlanAndSubscription(t *testing.T) {
	mf := []metav1.ManagedFieldsEntry{{Manager: "olm", Operation: metav1.ManagedFieldsOperationUpdate}}
	p := v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Name: "install-1", ManagedFields: mf, Annotations: map[string]string{"a": "b"}},
		Status: v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseComplete,
			Plan: []*v1alpha1.Step{{Resolving: "a.v1", Resource: v1alpha1.StepResource{Kind: "ClusterServiceVersion", Name: "a.v1", Manifest: strings.Repeat("m", 1<<10)}}, nil}}}
	got := TrimInstallPlan(p)
	if got.ManagedFields != nil || got.Annotations != nil || got.Status.Plan != nil {
		t.Errorf("trimmed plan keeps %v %v %v", got.ManagedFields, got.Annotations, got.Status.Plan)
	}
	if got.Status.Phase != v1alpha1.InstallPlanPhaseComplete || !got.Status.Populated() || p.Status.Plan[0].Resource.Manifest == "" {
		t.Errorf("trimmed plan lost what checks read (%+v), or the listed page was written", got.Status)
	}
	s := trimMetadata(v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: "s", ManagedFields: mf, Annotations: map[string]string{"a": "b"}},
		Spec: v1alpha1.SubscriptionSpec{Package: "p"}})
	if s.ManagedFields != nil || s.Annotations != nil || s.Name != "s" || s.Spec.Package != "p" {
		t.Errorf("trimmed Subscription %+v", s)
	}
}

// pointers is items as the checks take them: pointers to objects shared with their holder.
func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}
