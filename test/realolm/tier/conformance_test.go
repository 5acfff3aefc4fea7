package tier

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/testenv"
)

// Epsilon is installed once by each side of the conformance test and by nothing else, so its
// bundle is unpacked (ConfigMap and Job created) during the test.
var Epsilon = realolm.Package{Name: "epsilon", Versions: []string{"1.0.0"}}

// simDifferences are the facts in which test/olmsim knowingly differs from OLM v0.46.0, with why
// the difference does not matter to what olmguard's tests prove. Every other fact must agree.
var simDifferences = map[string]string{
	"adoption.labels": "olm-operator's adoption controller labels the Subscription, its CSV and its plan, and in time the " +
		"generated ClusterRole, operators.coreos.com/<package>.<namespace> (olm-facts.md §1.3); olmsim runs no adoption controller, and olmguard reads none of these labels",
	"plan.steps.status": "OLM executes an Installing plan again until every step reports Present (the CSV included); olmsim executes it once and " +
		"leaves Created. The re-execution is what recreates a CSV deleted during an upgrade (TestF3UninstallDuringUpgrade)",
	"subscription.conditions": "OLM sets BundleUnpacking=True while the unpack Job runs and never clears it; olmsim does the same on a cluster with a " +
		"Job controller, but on envtest it completes the Job in the pass that creates it, so the condition is never set",
}

// TestSimulatorConformance keeps test/olmsim honest: one install of Epsilon (a Subscription with
// Automatic approval in a fresh namespace with its OperatorGroup) is run by real OLM on the kwok
// cluster and by the simulator on an envtest control plane, and what each writes is compared:
// names, labels, ownerReferences, annotations, the plan's spec and steps, the Subscription's
// status, the unpack ConfigMap and Job, the bundled and generated ClusterRoles, and the order in
// which the ConfigMap, the Job, the plan and the CSV were created.
func TestSimulatorConformance(t *testing.T) {
	declare(t, "simulator conformance", false)
	c, _ := realOLM(t)
	if version() != realolm.Version {
		skipf(t, "the simulator reproduces OLM %s; OLM under test is %s", realolm.Version, version())
	}
	ctx := context.Background()

	realNS := operatorNamespace(t, c, "conformance")
	realRec := recordCreations(t, c.Config, realNS, realolm.CatalogNamespace, Epsilon.CSVName("1.0.0"), olm.UnpackName(Epsilon.Image("1.0.0")))
	subscribe(t, c, realNS, "epsilon", Epsilon, v1alpha1.ApprovalAutomatic, "")
	waitCSV(t, c, realNS, Epsilon.CSVName("1.0.0"))
	waitSubscriptionAtLatest(t, c.Client, realNS, "epsilon")
	// The CSV can be Succeeded and the Subscription AtLatestKnown while the plan still says
	// Installing: compare the plan once OLM has finished it.
	if err := realolm.NoPlanInstalling(ctx, c.Client, realNS); err != nil {
		t.Fatalf("the plan in %s never left Installing: %v", realNS, err)
	}
	real := collectFacts(t, c.Client, realNS, realolm.CatalogNamespace, Epsilon, realRec.order())

	env := testenv.Start(t)
	sim, err := olmsim.Start(ctx, env.Config, env.Scheme, olmsim.Options{Version: olmsim.V0_46, Namespace: cluster.OLMNamespace, CompleteJobs: true})
	if err != nil {
		t.Fatal(err)
	}
	cat := &olmsim.Catalog{Name: realolm.CatalogName, Namespace: cluster.OLMNamespace, Bundles: []olmsim.Bundle{Epsilon.SimBundle(0)}}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	simNS := "conformance-sim"
	if _, err := sim.CreateOperatorGroup(ctx, simNS, "og", simNS); err != nil {
		t.Fatal(err)
	}
	simRec := recordCreations(t, env.Config, simNS, cluster.OLMNamespace, Epsilon.CSVName("1.0.0"), olm.UnpackName(Epsilon.Image("1.0.0")))
	if _, err := sim.CreateSubscription(ctx, simNS, "epsilon", cat, Epsilon.Name, v1alpha1.ApprovalAutomatic); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Install(ctx, simNS, false); err != nil {
		t.Fatal(err)
	}
	simulated := collectFacts(t, env.Client, simNS, cluster.OLMNamespace, Epsilon, simRec.order())

	for _, key := range slices.Sorted(maps.Keys(mergeKeys(real, simulated))) {
		r, s := real[key], simulated[key]
		t.Logf("%-28s real: %s", key, r)
		if r == s {
			continue
		}
		if why, known := simDifferences[key]; known {
			t.Logf("%-28s sim:  %s (known difference: %s)", key, s, why)
			continue
		}
		t.Errorf("olmsim differs from OLM %s in %s:\n  real OLM: %s\n  olmsim:   %s", realolm.Version, key, r, s)
	}
}

// facts are what one install wrote, normalised so that two runs compare equal: the operator
// namespace reads <ns>, generated names their pattern, UIDs and times are left out.
type facts map[string]string

func mergeKeys(a, b facts) facts {
	out := facts{}
	for k := range a {
		out[k] = ""
	}
	for k := range b {
		out[k] = ""
	}
	return out
}

// collectFacts reads what the install of p's first version into ns wrote.
func collectFacts(t *testing.T, c client.Client, ns, catalogNS string, p realolm.Package, order string) facts {
	t.Helper()
	ctx := context.Background()
	norm := func(s string) string { return strings.ReplaceAll(s, ns, "<ns>") }
	f := facts{"order": order}
	var adopted []string
	meta := func(prefix string, o metav1.Object) {
		labels := maps.Clone(o.GetLabels())
		if _, ok := labels[olm.ComponentLabelKey(p.Name, ns)]; ok {
			adopted = append(adopted, prefix)
			delete(labels, olm.ComponentLabelKey(p.Name, ns))
		}
		// A hash in a label (the permissions' olm.permissions.hash) is compared by key only.
		f[prefix+".labels"] = norm(joinMap(withoutValue(labels, "olm.permissions.hash"), true))
		f[prefix+".annotations"] = norm(joinMap(o.GetAnnotations(), false))
		f[prefix+".owners"] = norm(owners(o.GetOwnerReferences()))
		f[prefix+".finalizers"] = strings.Join(o.GetFinalizers(), ",")
	}

	sub := &v1alpha1.Subscription{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.Name}, sub); err != nil {
		t.Fatal(err)
	}
	meta("subscription", sub)
	st := sub.Status
	f["subscription.status"] = fmt.Sprintf("state=%s currentCSV=%s installedCSV=%s generation=%d", st.State, st.CurrentCSV, st.InstalledCSV, st.InstallPlanGeneration)
	if st.InstallPlanRef == nil {
		t.Fatalf("Subscription %s/%s has no installPlanRef", ns, p.Name)
	}
	f["subscription.installPlanRef"] = fmt.Sprintf("%s %s", st.InstallPlanRef.APIVersion, st.InstallPlanRef.Kind)
	var conds []string
	for _, cond := range st.Conditions {
		conds = append(conds, fmt.Sprintf("%s=%s", cond.Type, cond.Status))
	}
	sort.Strings(conds)
	f["subscription.conditions"] = strings.Join(conds, ",")

	plans := &v1alpha1.InstallPlanList{}
	if err := c.List(ctx, plans, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	f["plans"] = strconv.Itoa(len(plans.Items))
	for _, ip := range plans.Items {
		if ip.Name != st.InstallPlanRef.Name {
			continue
		}
		f["plan.name"] = generatedName.ReplaceAllString(ip.Name, "$1<random>")
		meta("plan", &ip)
		f["plan.spec"] = fmt.Sprintf("approval=%s approved=%v generation=%d csvs=%s", ip.Spec.Approval, ip.Spec.Approved, ip.Spec.Generation, strings.Join(ip.Spec.ClusterServiceVersionNames, ","))
		f["plan.phase"] = string(ip.Status.Phase)
		f["plan.catalogSources"] = strings.Join(ip.Status.CatalogSources, ",")
		var steps, statuses []string
		for _, s := range ip.Status.Plan {
			steps = append(steps, generatedName.ReplaceAllString(s.Resource.Kind+"/"+s.Resource.Name, "$1<random>"))
			statuses = append(statuses, string(s.Status))
		}
		sort.Strings(steps)
		sort.Strings(statuses)
		f["plan.steps"] = strings.Join(steps, " ")
		f["plan.steps.status"] = strings.Join(slices.Compact(statuses), ",")
	}

	csv := &v1alpha1.ClusterServiceVersion{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: p.CSVName(p.Versions[0])}, csv); err != nil {
		t.Fatal(err)
	}
	meta("csv", csv)
	f["csv.phase"] = string(csv.Status.Phase)

	name := olm.UnpackName(p.Image(p.Versions[0]))
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: catalogNS, Name: name}, cm); err != nil {
		f["unpack.configmap"] = err.Error()
	} else {
		meta("unpack.configmap", cm)
	}
	job := &batchv1.Job{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: catalogNS, Name: name}, job); err != nil {
		f["unpack.job"] = err.Error()
	} else {
		meta("unpack.job", job)
		var ctrs []string
		for _, ctr := range append(slices.Clone(job.Spec.Template.Spec.InitContainers), job.Spec.Template.Spec.Containers...) {
			ctrs = append(ctrs, ctr.Name)
		}
		f["unpack.job.containers"] = strings.Join(ctrs, ",")
		deadline := "none"
		if d := job.Spec.ActiveDeadlineSeconds; d != nil {
			deadline = strconv.FormatInt(*d, 10)
		}
		f["unpack.job.activeDeadlineSeconds"] = deadline
	}

	bundled := &rbacv1.ClusterRole{}
	if err := c.Get(ctx, client.ObjectKey{Name: p.BundledClusterRole()}, bundled); err != nil {
		f["clusterrole.bundled"] = err.Error()
	} else {
		meta("clusterrole.bundled", bundled)
	}
	// The ClusterRole OLM generates from the CSV's clusterPermissions, found by its owner label.
	roles := &rbacv1.ClusterRoleList{}
	if err := c.List(ctx, roles, client.MatchingLabels{olm.OwnerLabel: csv.Name, olm.OwnerNamespaceLabel: ns}); err != nil {
		t.Fatal(err)
	}
	f["clusterrole.permissions"] = strconv.Itoa(len(roles.Items))
	for _, r := range roles.Items {
		if r.Name == p.BundledClusterRole() {
			continue
		}
		f["clusterrole.permissions.name"] = generatedName.ReplaceAllString(r.Name, "$1<random>")
		meta("clusterrole.permissions", &r)
	}
	sort.Strings(adopted)
	f["adoption.labels"] = strings.Join(adopted, ",")
	return f
}

// generatedName matches names with a random or hashed suffix: install-abcde, csv-1a2b3c...
var generatedName = regexp.MustCompile(`^(install-|.*\.v[0-9.]+-)[0-9a-zA-Z]{5,}$`)

// joinMap renders a map sorted by key; values only when withValues.
func joinMap(m map[string]string, withValues bool) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if withValues {
			parts = append(parts, k+"="+m[k])
		} else {
			parts = append(parts, k)
		}
	}
	return strings.Join(parts, ",")
}

// withoutValue keeps the key of a label whose value is a hash and drops the value.
func withoutValue(m map[string]string, key string) map[string]string {
	out := maps.Clone(m)
	if _, ok := out[key]; ok {
		out[key] = "<hash>"
	}
	return out
}

func owners(refs []metav1.OwnerReference) string {
	var parts []string
	for _, r := range refs {
		parts = append(parts, fmt.Sprintf("%s %s/%s controller=%v blockOwnerDeletion=%v", r.APIVersion, r.Kind,
			generatedName.ReplaceAllString(r.Name, "$1<random>"), r.Controller != nil && *r.Controller, r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// waitSubscriptionAtLatest waits for the Subscription's status to catch up with its CSV.
func waitSubscriptionAtLatest(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	if err := realolm.SubscriptionAtLatest(context.Background(), c, ns, name); err != nil {
		t.Fatalf("Subscription %s/%s never AtLatestKnown: %v", ns, name, err)
	}
}

// creations records when the objects of one install were created, by the resourceVersion of their
// first watch event: etcd's revisions order all writes of a cluster, whichever watch saw them.
type creations struct {
	mu    sync.Mutex
	first map[string]int64 // kind -> revision of its creation
}

// recordCreations watches, until the test ends, the InstallPlans of ns, the CSV csvName in ns and
// the unpack ConfigMap and Job named unpackName in catalogNS. The CSV is watched by name: a copy
// OLM makes in ns of another operator's CSV (an AllNamespaces install elsewhere on the cluster) is
// not this install's (ci run of db7b931: a copy made before the plan read as the CSV coming first).
func recordCreations(t *testing.T, cfg *rest.Config, ns, catalogNS, csvName, unpackName string) *creations {
	t.Helper()
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec := &creations{first: map[string]int64{}}
	watches := []struct {
		kind string
		list client.ObjectList
		ns   string
		name string
	}{
		{olm.InstallPlanKind, &v1alpha1.InstallPlanList{}, ns, ""},
		{olm.ClusterServiceVersionKind, &v1alpha1.ClusterServiceVersionList{}, ns, csvName},
		{"ConfigMap", &corev1.ConfigMapList{}, catalogNS, unpackName},
		{"Job", &batchv1.JobList{}, catalogNS, unpackName},
	}
	var wg sync.WaitGroup
	for _, w := range watches {
		wi, err := c.Watch(ctx, w.list, client.InNamespace(w.ns))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer wi.Stop()
			for ev := range wi.ResultChan() {
				o, ok := ev.Object.(client.Object)
				if !ok || ev.Type != watch.Added || (w.name != "" && o.GetName() != w.name) {
					continue
				}
				rv, err := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
				if err != nil {
					continue
				}
				rec.mu.Lock()
				if _, seen := rec.first[w.kind]; !seen {
					rec.first[w.kind] = rv
				}
				rec.mu.Unlock()
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	return rec
}

// order lists the kinds by creation.
func (r *creations) order() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	kinds := slices.Collect(maps.Keys(r.first))
	sort.Slice(kinds, func(i, j int) bool { return r.first[kinds[i]] < r.first[kinds[j]] })
	return strings.Join(kinds, " < ")
}
