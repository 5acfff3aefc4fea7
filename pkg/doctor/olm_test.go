package doctor

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// wants checks each finding's check list, and that every finding carries evidence and a fix
// whose commands (one a line) hold want.
func wants(t *testing.T, got []Finding, check string, fix ...string) {
	t.Helper()
	if c := checks(t, got); c != check {
		t.Fatalf("findings %q, want %q", c, check)
	}
	for i, f := range got {
		if f.Evidence == "" || f.Fix == "" || f.Class != OLM {
			t.Errorf("finding %s: class %s, evidence %q, fix %q", f.Check, f.Class, f.Evidence, f.Fix)
		}
		if cmds := strings.Join(f.Commands, "\n"); i < len(fix) && !strings.Contains(cmds, fix[i]) {
			t.Errorf("finding %s: commands %q lack %q", f.Check, cmds, fix[i])
		}
	}
}

// orphanMessage is the message OLM v0.46.0 writes (seen in the real-OLM tier) when an installed
// CSV no Subscription references blocks a new Subscription to its package.
const orphanMessage = "constraints not satisfiable: @existing/ns//beta.v1.0.0 and realolm/olm/stable/beta.v1.0.0 originate from package beta, " +
	"clusterserviceversion beta.v1.0.0 exists and is not referenced by a subscription, subscription beta-again exists, " +
	"subscription beta-again requires realolm/olm/stable/beta.v1.0.0"

func resolutionFailed(sub v1alpha1.Subscription, reason, message string) v1alpha1.Subscription {
	sub.Status.Conditions = append(sub.Status.Conditions, v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionResolutionFailed,
		Status: corev1.ConditionTrue, Reason: reason, Message: message})
	return sub
}

func TestCheckBlockingCSVs(t *testing.T) {
	csv := func(name string) CSV { return CSV{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}} }
	blocked := resolutionFailed(subscription("beta-again", "u1", "", ""), "ConstraintsNotSatisfiable", orphanMessage)
	installed := subscription("beta", "u2", "", v1alpha1.SubscriptionStateAtLatest)
	installed.Status.InstalledCSV = "beta.v1.0.0"
	copied := csv("beta.v1.0.0")
	copied.Labels = map[string]string{olm.CopiedFromLabel: "ops"}
	tests := []struct {
		name string
		csvs []CSV
		subs []v1alpha1.Subscription
		want string
	}{
		{"an orphan CSV blamed by a failed resolution", []CSV{csv("beta.v1.0.0")}, []v1alpha1.Subscription{blocked}, "OLM:OrphanCSVBlocksResolution:ns/beta.v1.0.0"},
		{"the blamed CSV is gone", nil, []v1alpha1.Subscription{blocked}, ""},
		{"another Subscription owns the blamed CSV: a real conflict", []CSV{csv("beta.v1.0.0")}, []v1alpha1.Subscription{blocked, installed}, ""},
		{"a retried failure (ErrorPreventedResolution)", []CSV{csv("beta.v1.0.0")},
			[]v1alpha1.Subscription{resolutionFailed(subscription("beta-again", "u1", "", ""), "ErrorPreventedResolution", orphanMessage)}, ""},
		{"a copy is never the orphan", []CSV{copied}, []v1alpha1.Subscription{blocked}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckBlockingCSVs(tt.csvs, pointers(tt.subs), now)
			if tt.want == "" {
				wants(t, got, "")
				return
			}
			wants(t, got, tt.want, "kubectl -n ns delete csv beta.v1.0.0\nkubectl -n ns annotate subscription beta-again olmguard.io/resync=1795262400 --overwrite")
			if !strings.Contains(got[0].Evidence, "ConstraintsNotSatisfiable: constraints not satisfiable") || !strings.Contains(got[0].Problem, "beta-again") {
				t.Errorf("evidence %q, problem %q", got[0].Evidence, got[0].Problem)
			}
		})
	}
}

func TestCheckStuckCSVs(t *testing.T) {
	csv := func(name string, phase v1alpha1.ClusterServiceVersionPhase, reason string, since time.Duration) v1alpha1.ClusterServiceVersion {
		return v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, CreationTimestamp: *ago(time.Hour)},
			Status: v1alpha1.ClusterServiceVersionStatus{Phase: phase, Reason: v1alpha1.ConditionReason(reason), Message: "msg of " + name,
				LastTransitionTime: ago(since)}}
	}
	noTime := csv("created-long-ago", v1alpha1.CSVPhaseInstalling, "InstallWaiting", 0)
	noTime.Status.LastTransitionTime = nil
	deleting := csv("deleting", v1alpha1.CSVPhasePending, "RequirementsNotMet", time.Hour)
	deleting.DeletionTimestamp = ago(time.Second)
	csvs := []v1alpha1.ClusterServiceVersion{
		csv("installing", v1alpha1.CSVPhaseInstalling, "InstallWaiting", 20*time.Minute),
		csv("pending", v1alpha1.CSVPhasePending, "RequirementsNotMet", 20*time.Minute),
		csv("recent", v1alpha1.CSVPhaseInstalling, "InstallWaiting", time.Minute),
		csv("succeeded", v1alpha1.CSVPhaseSucceeded, "InstallSucceeded", time.Hour),
		csv("failed", v1alpha1.CSVPhaseFailed, "TooManyOperatorGroups", time.Hour),
		noTime, deleting,
		csv("copy", v1alpha1.CSVPhaseInstalling, "Copied", time.Hour),
	}
	got := CheckStuckCSVs(csvs, now, 10*time.Minute)
	wants(t, got, "OLM:CSVStuckInstalling:ns/installing,OLM:CSVStuckInstalling:ns/pending,OLM:CSVStuckInstalling:ns/created-long-ago",
		"kubectl -n ns describe deployments -l olm.owner=installing\nkubectl -n ns get events --sort-by=.lastTimestamp",
		`kubectl -n ns get csv pending -o 'jsonpath={range .status.requirementStatus[?(@.status!="Present")]}{.kind} {.name}: {.status} {.message}{"\n"}{end}'`)
	if e := got[1].Evidence; !strings.Contains(e, "status.phase=Pending, reason RequirementsNotMet: msg of pending") {
		t.Errorf("evidence %q lacks OLM's reason and message", e)
	}
	if !strings.Contains(got[0].Problem, "Installing for 20m0s") || !strings.Contains(got[2].Problem, "Installing for 1h0m0s") {
		t.Errorf("problems %q / %q", got[0].Problem, got[2].Problem)
	}
}

func TestCheckOperatorGroups(t *testing.T) {
	og := func(ns, name string, age time.Duration) olmv1.OperatorGroup {
		return olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, CreationTimestamp: *ago(age)}}
	}
	sub := func(ns string) v1alpha1.Subscription {
		return v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}
	}
	failed := func(ns, reason, msg string) v1alpha1.ClusterServiceVersion {
		return v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "op.v1"},
			Status: v1alpha1.ClusterServiceVersionStatus{Phase: v1alpha1.CSVPhaseFailed, Reason: v1alpha1.ConditionReason(reason), Message: msg}}
	}
	ogs := []olmv1.OperatorGroup{og("two", "second", time.Minute), og("two", "first", time.Hour), og("one", "og", time.Hour),
		og("three", "c", time.Minute), og("three", "a", time.Hour), og("three", "b", 2*time.Minute), og("empty", "og", time.Hour)}
	subs := []v1alpha1.Subscription{sub("two"), sub("one"), sub("none"), sub("three")}
	csvs := []v1alpha1.ClusterServiceVersion{
		failed("two", "TooManyOperatorGroups", "csv created in namespace with multiple operatorgroups, can't pick one automatically"),
		failed("none", "NoOperatorGroup", "csv in namespace with no operatorgroups"),
	}
	got := CheckOperatorGroups(ogs, pointers(subs), csvs)
	wants(t, got, "OLM:TooManyOperatorGroups:three/c,OLM:TooManyOperatorGroups:two/second,OLM:NoOperatorGroup:none/none",
		"kubectl -n three delete operatorgroup b c", "kubectl -n two delete operatorgroup second", "kubectl -n none apply -f operatorgroup.json")
	if e := got[1].Evidence; !strings.Contains(e, "OperatorGroups first, second (oldest first)") || !strings.Contains(e, "Failed, TooManyOperatorGroups: csv created") {
		t.Errorf("evidence %q", e)
	}
	if e := got[2].Evidence; !strings.Contains(e, "Subscriptions s and no OperatorGroup") || !strings.Contains(e, "NoOperatorGroup: csv in namespace with no operatorgroups") {
		t.Errorf("evidence %q", e)
	}
	if !strings.Contains(got[2].Fix, `"targetNamespaces":["none"]`) {
		t.Errorf("fix %q", got[2].Fix)
	}
}

func TestCheckUnpackFailures(t *testing.T) {
	job := func(name string, cond *batchv1.JobCondition) batchv1.Job {
		j := batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: name,
			OwnerReferences: []metav1.OwnerReference{configMapRef("olm", "cm-"+name)}}}
		if cond != nil {
			j.Status.Conditions = []batchv1.JobCondition{*cond}
		}
		return j
	}
	deadline := &batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}
	jobs := []batchv1.Job{job("failed", deadline), job("running", nil),
		job("done", &batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue})}

	unpackFailed := subscription("beta", "u", "", "", v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpackFailed,
		Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonBundleUnpackFailed,
		Message: "bundle unpacking failed. Reason: DeadlineExceeded, and Message: Job was active longer than specified deadline"})
	unpackFailed.Spec.CatalogSourceNamespace = "olm"
	unpacking := subscription("gamma", "u2", "", "", v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpacking,
		Status: corev1.ConditionTrue, Reason: v1alpha1.ReasonUnpackingInProgress})

	lookupFailed := installPlan("install-old", v1alpha1.InstallPlanPhaseFailed)
	lookupFailed.Status.BundleLookups = []v1alpha1.BundleLookup{{Path: "quay.io/x/beta-bundle:v1", CatalogSourceRef: &corev1.ObjectReference{Namespace: "olm", Name: "cat"},
		Conditions: []v1alpha1.BundleLookupCondition{{Type: "BundleLookupFailed", Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "Job was active longer than specified deadline"}}}}
	installedFalse := installPlan("install-cond", v1alpha1.InstallPlanPhaseFailed)
	installedFalse.Status.Conditions = []v1alpha1.InstallPlanCondition{{Type: "Installed", Status: corev1.ConditionFalse, Reason: "InstallCheckFailed",
		Message: "bundle unpacking failed. Reason: DeadlineExceeded, and Message: Job was active longer than specified deadline"}}
	otherFailure := installPlan("install-other", v1alpha1.InstallPlanPhaseFailed)
	otherFailure.Status.Conditions = []v1alpha1.InstallPlanCondition{{Type: "Installed", Status: corev1.ConditionFalse, Reason: "InstallComponentFailed", Message: "forbidden"}}
	plans := []v1alpha1.InstallPlan{lookupFailed, installedFalse, otherFailure, installPlan("install-ok", v1alpha1.InstallPlanPhaseComplete)}
	ogs := []olmv1.OperatorGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "og"}}}

	olmConfigMaps := unpackConfigMaps(olmConfigMap("cm-failed"))
	got := CheckUnpackFailures(jobs, olmConfigMaps, []*v1alpha1.Subscription{&unpackFailed, &unpacking}, pointers(plans), ogs)
	name := olm.UnpackName("quay.io/x/beta-bundle:v1")
	wants(t, got, "OLM:UnpackJobFailed:olm/failed,OLM:BundleUnpackFailed:ns/beta,OLM:InstallPlanUnpackFailed:ns/install-old,OLM:InstallPlanUnpackFailed:ns/install-cond",
		"kubectl -n olm delete job/failed configmap/cm-failed",
		"kubectl -n olm delete job/failed configmap/cm-failed\n",
		"kubectl -n olm delete job -l operatorframework.io/bundle-unpack-ref="+name+"\nkubectl -n olm delete configmap "+name+" --ignore-not-found\nkubectl -n ns delete installplan install-old",
		"kubectl -n ns delete installplan install-cond")
	if len(got[0].Commands) != 1 || len(got[1].Commands) != 2 || len(got[2].Commands) != 3 {
		t.Errorf("commands %q / %q / %q", got[0].Commands, got[1].Commands, got[2].Commands)
	}
	if !strings.Contains(got[0].Evidence, "DeadlineExceeded: Job was active longer") || !strings.Contains(got[3].Evidence, "InstallCheckFailed: bundle unpacking failed") {
		t.Errorf("evidence %q / %q", got[0].Evidence, got[3].Evidence)
	}
	if !strings.Contains(strings.Join(got[1].Commands, "\n"), "kubectl -n ns annotate operatorgroup og operatorframework.io/bundle-unpack-timeout=30m operatorframework.io/bundle-unpack-min-retry-interval=10m --overwrite") {
		t.Errorf("commands %q lack the retry annotation on the namespace's OperatorGroup", got[1].Commands)
	}
}

func TestCheckCatalogSources(t *testing.T) {
	cat := func(name, state string, age time.Duration, mod func(*v1alpha1.CatalogSource)) v1alpha1.CatalogSource {
		cs := v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: name, CreationTimestamp: *ago(age)},
			Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: "quay.io/x/index:v1"}}
		if state != "" {
			cs.Status.ConnectionState = &v1alpha1.GRPCConnectionState{Address: name + ".olm.svc:50051", LastObservedState: state, LastConnectTime: ago(time.Minute)}
		}
		if mod != nil {
			mod(&cs)
		}
		return cs
	}
	cats := []v1alpha1.CatalogSource{
		cat("ready", "READY", time.Hour, nil),
		cat("failing", "TRANSIENT_FAILURE", time.Hour, nil),
		cat("young", "CONNECTING", time.Minute, nil),
		cat("never", "", time.Hour, func(cs *v1alpha1.CatalogSource) {
			cs.Status.Reason, cs.Status.Message = "RegistryServerError", "couldn't ensure registry server"
		}),
		cat("nowhere", "TRANSIENT_FAILURE", time.Hour, func(cs *v1alpha1.CatalogSource) { cs.Spec.Image, cs.Spec.Address = "", "10.0.0.1:50051" }),
		cat("deleting", "SHUTDOWN", time.Hour, func(cs *v1alpha1.CatalogSource) { cs.DeletionTimestamp = ago(time.Second) }),
	}
	got := CheckCatalogSources(cats, now, 10*time.Minute)
	wants(t, got, "OLM:CatalogNotReady:olm/failing,OLM:CatalogNotReady:olm/never,OLM:CatalogNotReady:olm/nowhere",
		"kubectl -n olm describe pods -l olm.catalogSource=failing", "",
		`kubectl -n olm patch catalogsource nowhere --type merge -p '{"spec":{"address":"HOST:PORT"}}'`+"\nkubectl -n olm delete catalogsource nowhere")
	if !strings.Contains(got[0].Evidence, "lastObservedState=TRANSIENT_FAILURE, address failing.olm.svc:50051") ||
		!strings.Contains(got[1].Evidence, "never connected; status.reason RegistryServerError") {
		t.Errorf("evidence %q / %q", got[0].Evidence, got[1].Evidence)
	}
}

func TestCheckCatalogPodContainers(t *testing.T) {
	ready := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	pod := func(name string, labels map[string]string, st corev1.ContainerStatus) corev1.Pod {
		st.Name = "registry-server"
		if labels == nil {
			labels = map[string]string{olm.CatalogSourceLabel: "ops"}
		}
		return corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "olm", Name: name, Labels: labels}, Spec: corev1.PodSpec{NodeName: "n"},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{st}}}
	}
	oom := &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, FinishedAt: *ago(time.Minute)}
	crash := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	pods := []corev1.Pod{
		pod("healthy", nil, corev1.ContainerStatus{State: running}),
		pod("oom-looping", nil, corev1.ContainerStatus{State: crash, LastTerminationState: corev1.ContainerState{Terminated: oom}, RestartCount: 4}),
		pod("oom-now", nil, corev1.ContainerStatus{State: corev1.ContainerState{Terminated: oom}}),
		pod("crashing", nil, corev1.ContainerStatus{State: crash, RestartCount: 7,
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 1}}}),
		pod("update-pod", map[string]string{olm.CatalogSourceLabel: "", olm.CatalogSourceUpdateLabel: "ops"}, corev1.ContainerStatus{State: crash}),
		pod("image-pull", nil, corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}),
	}
	got := CheckCatalogPods(pods, []corev1.Node{ready}, now, 5*time.Minute, nil)
	wants(t, got, "OLM:CatalogPodOOMKilled:olm/oom-looping,OLM:CatalogPodOOMKilled:olm/oom-now,OLM:CatalogPodCrashLoop:olm/crashing",
		"kubectl -n olm get limitrange\n"+`kubectl -n olm patch catalogsource ops --type merge -p '{"spec":{"grpcPodConfig":{"memoryTarget":"512Mi"}}}'`, "",
		"kubectl -n olm logs crashing -c registry-server --previous")
	if e := got[0].Evidence; !strings.Contains(e, "last terminated OOMKilled (exit code 137)") || !strings.Contains(e, "4 restarts, now waiting CrashLoopBackOff") {
		t.Errorf("evidence %q", e)
	}
	if e := got[2].Evidence; !strings.Contains(e, "CrashLoopBackOff, 7 restarts, last terminated Error (exit code 1)") {
		t.Errorf("evidence %q", e)
	}
}

func TestCheckPackageServer(t *testing.T) {
	svc := func(conds ...APIServiceCondition) *APIService {
		return &APIService{Name: PackageServerAPIService, Service: &APIServiceRef{Namespace: "olm", Name: "packageserver-service"}, Conditions: conds}
	}
	tests := []struct {
		name string
		svc  *APIService
		want string
	}{
		{"no APIService: OLM without packageserver", nil, ""},
		{"available", svc(APIServiceCondition{Type: "Available", Status: "True", Reason: "Passed"}), ""},
		{"service has no endpoints", svc(APIServiceCondition{Type: "Available", Status: "False", Reason: "MissingEndpoints",
			Message: `endpoints for service/packageserver-service in "olm" have no addresses with port name "5443"`}), "OLM:PackageServerUnavailable:/" + PackageServerAPIService},
		{"not checked yet", svc(), "OLM:PackageServerUnavailable:/" + PackageServerAPIService},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := CheckPackageServer(tt.svc)
			wants(t, got, tt.want, "kubectl -n olm get csv packageserver\nkubectl -n olm get endpoints packageserver-service\nkubectl -n olm rollout restart deployment packageserver")
			if len(got) == 1 && tt.svc.Conditions != nil && !strings.Contains(got[0].Evidence, "Available=False") {
				t.Errorf("evidence %q", got[0].Evidence)
			}
		})
	}
}

func TestTableShowsEvidence(t *testing.T) {
	var b strings.Builder
	r := &Report{Findings: []Finding{{Class: OLM, Kind: "Pod", Namespace: "olm", Name: "p", Check: "CatalogPodCrashLoop", Problem: "crash-loops",
		Evidence: "container registry-server: waiting CrashLoopBackOff", Fix: "kubectl logs"}}, Checked: map[string]int{}}
	if err := WriteTable(&b, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "crash-loops [evidence: container registry-server: waiting CrashLoopBackOff]") || !strings.Contains(b.String(), "(OLM: 1)") {
		t.Errorf("table:\n%s", b.String())
	}
}
