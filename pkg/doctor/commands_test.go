package doctor

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/internal/printable"
	"github.com/olmguard/olmguard/internal/shellquote"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// AssertCommands checks the property every finding's commands hold: each parses, as a POSIX
// shell reads it, into exactly one simple command whose first word is kubectl (shellquote.Split
// refuses operators, expansions, globs and newlines outside quotes), sh itself parses it into the
// same words, and it holds no character a terminal acts on. Every test of this package that
// makes findings runs it on them (checks, wants, the audit tests).
func AssertCommands(t testing.TB, fs []Finding) {
	t.Helper()
	sh, _ := exec.LookPath("sh")
	for _, f := range fs {
		for _, c := range f.Commands {
			words, err := shellquote.Split(c)
			if err != nil || words[0] != "kubectl" {
				t.Errorf("%s %s/%s: command %q is not one kubectl invocation: %q, %v", f.Check, f.Namespace, f.Name, c, words, err)
				continue
			}
			if printable.Escape(c) != c {
				t.Errorf("%s %s/%s: command %q holds control characters", f.Check, f.Namespace, f.Name, c)
			}
			if sh == "" {
				continue
			}
			out, err := exec.Command(sh, "-c", `eval "set -- $1"; for a; do printf '%s\0' "$a"; done`, "_", c).Output()
			if got := strings.Split(string(out), "\x00"); err != nil || !slices.Equal(got[:len(got)-1], words) {
				t.Errorf("%s %s/%s: sh parses %q into %q (%v), not %q", f.Check, f.Namespace, f.Name, c, got, err, words)
			}
		}
	}
}

// attack is the ConfigMap name of issue 31: pasted unquoted after `configmap/`, it ends the
// command and grants the tenant cluster-admin.
const attack = "x; kubectl create clusterrolebinding pwn --clusterrole=cluster-admin --user=tenant-a; echo "

// A tenant's failed Job with a made-up ConfigMap ownerReference is no unpack failure: no finding,
// no command built from the name. OLM's own failed unpack Job gets one kubectl invocation. Fails
// before the fix: CheckUnpackFailures took any ownerReference of kind ConfigMap (any group) for
// the Job's ConfigMap and pasted its name into `kubectl -n NS delete job/J configmap/NAME`.
func TestUnpackFailuresIgnoreForgedOwners(t *testing.T) {
	failed := func(ns, name string, refs ...metav1.OwnerReference) batchv1.Job {
		return batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs},
			Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded"}}}}
	}
	real := configMapRef("tenant-a", "x")
	otherGroup := metav1.OwnerReference{APIVersion: "evil.example.com/v1", Kind: "ConfigMap", Name: attack, UID: "u"}
	v1Attack := configMapRef("tenant-a", attack)
	jobs := []batchv1.Job{
		failed("tenant-a", "unpack-x", otherGroup, real), // another group's "ConfigMap" first, then a name of a ConfigMap that does not exist
		failed("tenant-a", "unpack-y", v1Attack),         // apiVersion v1, a name no ConfigMap can have
		failed("tenant-a", "unpack-z", otherGroup),       // only the other group's
		failed("olm", "ok", configMapRef("olm", "abc")),  // OLM's
	}
	subs := []v1alpha1.Subscription{subscription("s", "u", "", "", v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpackFailed,
		Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonBundleUnpackFailed})}
	subs[0].Namespace, subs[0].Spec.CatalogSourceNamespace = "tenant-a", "tenant-a"
	got := CheckUnpackFailures(jobs, unpackConfigMaps(olmConfigMap("abc")), pointers(subs), nil, nil)
	got = append(got, CheckUnpackJobs(jobs, unpackConfigMaps(olmConfigMap("abc")))...)
	if c := checks(t, got); c != "OLM:UnpackJobFailed:olm/ok,OLM:BundleUnpackFailed:tenant-a/s,F4:UnpackJobInvisible:olm/ok" {
		t.Fatalf("findings %s", c)
	}
	if !slices.Equal(got[0].Commands, []string{"kubectl -n olm delete job/ok configmap/abc"}) || len(got[1].Commands) != 0 {
		t.Errorf("commands %q / %q", got[0].Commands, got[1].Commands)
	}
	var b strings.Builder
	if err := WriteTable(&b, &Report{Findings: got, Checked: map[string]int{}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "clusterrolebinding") {
		t.Errorf("the table prints the forged name:\n%s", b.String())
	}
}

// A finding whose fix needs a name that is not a valid Kubernetes name is still reported, prints
// no command and says why (here an InstallPlan's bundle lookup names a namespace that cannot
// exist, and a catalog pod's label names a catalog that cannot).
func TestInvalidNamePrintsNoCommand(t *testing.T) {
	plan := installPlan("install-x", v1alpha1.InstallPlanPhaseFailed)
	plan.Status.BundleLookups = []v1alpha1.BundleLookup{{Path: "quay.io/x/b:v1", CatalogSourceRef: &corev1.ObjectReference{Namespace: "olm; id", Name: "cat"},
		Conditions: []v1alpha1.BundleLookupCondition{{Type: "BundleLookupFailed", Status: corev1.ConditionTrue}}}}
	got := CheckUnpackFailures(nil, unpackConfigMaps(), nil, []*v1alpha1.InstallPlan{&plan}, nil)
	pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: "p", Labels: map[string]string{olm.CatalogSourceLabel: "Not_A_Catalog"}},
		Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{Name: "registry-server",
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled"}}}}}}
	ready := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	got = append(got, CheckCatalogPods([]corev1.Pod{pod}, []corev1.Node{ready}, now, time.Minute, nil)...)
	if c := checks(t, got); c != "OLM:InstallPlanUnpackFailed:ns/install-x,OLM:CatalogPodOOMKilled:olm/p" {
		t.Fatalf("findings %s", c)
	}
	for i, want := range []string{`no command printed: Namespace name "olm; id" is not a valid Kubernetes name`,
		`no command printed: CatalogSource name "Not_A_Catalog" is not a valid Kubernetes name`} {
		if len(got[i].Commands) != 0 || !strings.HasSuffix(got[i].Fix, want) {
			t.Errorf("%s: commands %q, fix %q; want none and %q", got[i].Check, got[i].Commands, got[i].Fix, want)
		}
	}
}

// The table prints each command on a line of its own, under the fix.
func TestTablePrintsCommands(t *testing.T) {
	r := &Report{Findings: []Finding{{Class: F3, Kind: "ClusterServiceVersion", Namespace: "ns", Name: "a.v1", Check: "CSVWithoutSubscription",
		Problem: "p", Fix: "delete it", Commands: []string{"kubectl -n ns delete csv a.v1", "kubectl -n ns get csv"}}}, Checked: map[string]int{}}
	var b strings.Builder
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	fix := strings.Index(lines[1], "delete it")
	if fix < 0 || len(lines) < 4 || strings.TrimSpace(lines[2]) != "kubectl -n ns delete csv a.v1" || strings.TrimSpace(lines[3]) != "kubectl -n ns get csv" ||
		strings.Index(lines[2], "kubectl") < fix {
		t.Errorf("table:\n%s", b.String())
	}
}
