package doctor_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestAuditOLMChecks: every OLM check through a real apiserver, on objects shaped as OLM, the
// kubelet and the Job controller write them (olm-facts.md §2.2, §4.3, §5; OLM's CRDs). The envtest
// control plane runs no OLM, kubelet or Job controller, so their status writes are made here; the
// packageserver APIService's Available=False is the apiserver's own aggregator's (its Service does
// not exist). The real-OLM tier (test/realolm/tier/doctor_test.go) shows the failures OLM produces there.
func TestAuditOLMChecks(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 4*testenv.Patience)
	defer cancel()
	create := func(obj client.Object) {
		t.Helper()
		if err := c.Create(ctx, obj); err != nil {
			t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
		}
	}
	status := func(obj client.Object) {
		t.Helper()
		if err := c.Status().Update(ctx, obj); err != nil {
			t.Fatalf("status of %T %s: %v", obj, obj.GetName(), err)
		}
	}
	const ns, noOG = "doctor-olm", "doctor-olm-noog"
	for _, name := range []string{ns, noOG} {
		create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	}
	long := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))

	// Two OperatorGroups; the installed CSV failed by OLM for it.
	for _, name := range []string{"og", "og-again"} {
		create(&olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	}
	newCSV := func(ns, name string, phase v1alpha1.ClusterServiceVersionPhase, reason, message string) {
		csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.ClusterServiceVersionSpec{DisplayName: name, InstallStrategy: v1alpha1.NamedInstallStrategy{StrategyName: "deployment"}}}
		create(csv)
		csv.Status = v1alpha1.ClusterServiceVersionStatus{Phase: phase, Reason: v1alpha1.ConditionReason(reason), Message: message, LastTransitionTime: &long}
		status(csv)
	}
	newCSV(ns, "alpha.v1.0.0", v1alpha1.CSVPhaseFailed, string(v1alpha1.CSVReasonTooManyOperatorGroups), "csv created in namespace with multiple operatorgroups, can't pick one automatically")
	// A CSV waiting for its Deployment for an hour.
	newCSV(ns, "gamma.v1.0.0", v1alpha1.CSVPhaseInstalling, "InstallWaiting", `installing: waiting for deployment gamma to become ready: deployment "gamma" not available`)
	// An orphan CSV and the Subscription whose resolution it blocks.
	newCSV(ns, "beta.v1.0.0", v1alpha1.CSVPhaseSucceeded, "InstallSucceeded", "install strategy completed with no errors")
	newSub := func(ns, name string, conds ...v1alpha1.SubscriptionCondition) {
		sub := &v1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.SubscriptionSpec{Package: name, Channel: "stable", CatalogSource: "cat", CatalogSourceNamespace: ns}}
		create(sub)
		now := metav1.Now()
		for i := range conds {
			conds[i].Status, conds[i].LastTransitionTime = corev1.ConditionTrue, &now
		}
		sub.Status = v1alpha1.SubscriptionStatus{Conditions: conds, LastUpdated: now}
		status(sub)
	}
	newSub(ns, "beta-again", v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionResolutionFailed, Reason: "ConstraintsNotSatisfiable",
		Message: "constraints not satisfiable: @existing/" + ns + "//beta.v1.0.0 and cat/" + ns + "/stable/beta.v1.0.0 originate from package beta, " +
			"subscription beta-again requires cat/" + ns + "/stable/beta.v1.0.0, subscription beta-again exists, clusterserviceversion beta.v1.0.0 exists and is not referenced by a subscription"})
	// A bundle unpack that exceeded its deadline: the Job, the Subscription and the plan.
	newSub(ns, "delta", v1alpha1.SubscriptionCondition{Type: v1alpha1.SubscriptionBundleUnpackFailed, Reason: v1alpha1.ReasonBundleUnpackFailed,
		Message: "bundle unpacking failed. Reason: DeadlineExceeded, and Message: Job was active longer than specified deadline"})
	newSub(noOG, "epsilon")

	cat := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cat"},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: "192.0.2.1:50051"}}
	create(cat)
	cat.Status.ConnectionState = &v1alpha1.GRPCConnectionState{Address: cat.Spec.Address, LastObservedState: "TRANSIENT_FAILURE", LastConnectTime: &long}
	status(cat)

	bundle := "example.com/delta-bundle:v1"
	unpack := olm.UnpackName(bundle)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: unpack, Labels: map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: cat.Name, UID: cat.UID}}}}
	create(cm)
	deadline := int64(600)
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: unpack,
		Labels:          map[string]string{olm.ManagedLabel: olm.ManagedLabelValue, olm.BundleUnpackRefLabel: unpack},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}},
		Spec: batchv1.JobSpec{ActiveDeadlineSeconds: &deadline, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "extract", Image: "quay.io/operator-framework/opm"}}}}}}
	create(job)
	// What the Job controller writes when activeDeadlineSeconds passes.
	job.Status.StartTime = &long
	for _, typ := range []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobFailed} {
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded",
			Message: "Job was active longer than specified deadline", LastProbeTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	}
	status(job)
	plan := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "install-delta"},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"delta.v1"}, Approval: v1alpha1.ApprovalAutomatic, Approved: true, Generation: 1}}
	create(plan)
	plan.Status = v1alpha1.InstallPlanStatus{Phase: v1alpha1.InstallPlanPhaseFailed, CatalogSources: []string{},
		BundleLookups: []v1alpha1.BundleLookup{{Path: bundle, Identifier: "delta.v1", CatalogSourceRef: &corev1.ObjectReference{Namespace: ns, Name: cat.Name},
			Conditions: []v1alpha1.BundleLookupCondition{{Type: "BundleLookupFailed", Status: corev1.ConditionTrue, Reason: "DeadlineExceeded",
				Message: "Job was active longer than specified deadline"}}}}}
	status(plan)

	// A registry pod OOMKilled, restarting, on a Ready node.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "doctor-olm-node"}}
	create(node)
	t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
	status(node)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cat-x7k2p", Labels: map[string]string{olm.CatalogSourceLabel: "image-cat", olm.ManagedLabel: "true"}},
		Spec: corev1.PodSpec{NodeName: node.Name, Containers: []corev1.Container{{Name: "registry-server", Image: "quay.io/x/index:v1"}}}}
	create(pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "registry-server", Image: "quay.io/x/index:v1",
		RestartCount: 5, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 2m40s restarting failed container"}},
		LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "OOMKilled", ExitCode: 137, StartedAt: long, FinishedAt: metav1.Now()}}}}}
	status(pod)

	// The packages API, served by a Service that does not exist: the aggregator marks it unavailable.
	apisvc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": doctor.PackageServerAPIService},
		"spec": map[string]any{"group": "packages.operators.coreos.com", "version": "v1", "groupPriorityMinimum": int64(2000), "versionPriority": int64(15),
			"insecureSkipTLSVerify": true, "service": map[string]any{"namespace": "olm", "name": "packageserver-service", "port": int64(5443)}}}}
	create(apisvc)
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), apisvc); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})

	opts := doctor.DefaultOptions()
	// Half an hour on: the catalog (created now) and the CSV (in its phase for an hour) are past
	// the default --pending-after (10m).
	opts.Recheck, opts.Now = 0, func() time.Time { return time.Now().Add(30 * time.Minute) }
	mine := func(r *doctor.Report) map[string]doctor.Finding {
		out := map[string]doctor.Finding{}
		for _, f := range r.Findings {
			if f.Class == doctor.OLM && (f.Namespace == ns || f.Namespace == noOG || f.Kind == "APIService") {
				out[f.Check+" "+f.Namespace+"/"+f.Name] = f
			}
		}
		return out
	}
	var got map[string]doctor.Finding
	testenv.Eventually(t, "the aggregator reports the packages API unavailable", func(ctx context.Context) (bool, error) {
		r, err := doctor.Audit(ctx, c, opts)
		if err != nil {
			return false, err
		}
		got = mine(r)
		_, ok := got["PackageServerUnavailable /"+doctor.PackageServerAPIService]
		return ok, nil
	})
	want := []string{
		"TooManyOperatorGroups " + ns + "/og-again",
		"CSVStuckInstalling " + ns + "/gamma.v1.0.0",
		"OrphanCSVBlocksResolution " + ns + "/beta.v1.0.0",
		"BundleUnpackFailed " + ns + "/delta",
		"UnpackJobFailed " + ns + "/" + unpack,
		"InstallPlanUnpackFailed " + ns + "/install-delta",
		"CatalogNotReady " + ns + "/cat",
		"CatalogPodOOMKilled " + ns + "/cat-x7k2p",
		"NoOperatorGroup " + noOG + "/" + noOG,
		"PackageServerUnavailable /" + doctor.PackageServerAPIService,
	}
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("findings\n  %s\nwant\n  %s", strings.Join(keys, "\n  "), strings.Join(want, "\n  "))
	}
	for k, f := range got {
		if f.Evidence == "" || f.Fix == "" || len(f.Commands) == 0 {
			t.Errorf("%s: evidence %q, fix %q, commands %q", k, f.Evidence, f.Fix, f.Commands)
		}
		doctor.AssertCommands(t, []doctor.Finding{f})
	}
	// OLM's failed unpack Job, owned by its ConfigMap (with its UID): one kubectl invocation.
	if cmds := got["UnpackJobFailed "+ns+"/"+unpack].Commands; !slices.Equal(cmds, []string{"kubectl -n " + ns + " delete job/" + unpack + " configmap/" + unpack}) {
		t.Errorf("UnpackJobFailed commands %q", cmds)
	}
	for k, sub := range map[string]string{
		"PackageServerUnavailable /" + doctor.PackageServerAPIService: "Available=False",
		"TooManyOperatorGroups " + ns + "/og-again":                   "can't pick one automatically",
		"UnpackJobFailed " + ns + "/" + unpack:                        "DeadlineExceeded: Job was active longer than specified deadline",
		"CatalogPodOOMKilled " + ns + "/cat-x7k2p":                    "OOMKilled (exit code 137)",
		"CatalogNotReady " + ns + "/cat":                              "TRANSIENT_FAILURE",
	} {
		if !strings.Contains(got[k].Evidence, sub) {
			t.Errorf("%s: evidence %q lacks %q", k, got[k].Evidence, sub)
		}
	}
	// Young objects are not reported yet: the thresholds count from OLM's timestamps.
	opts.PendingAfter = 2 * time.Hour
	r, err := doctor.Audit(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	for k := range mine(r) {
		if strings.HasPrefix(k, "CSVStuckInstalling") || strings.HasPrefix(k, "CatalogNotReady") {
			t.Errorf("reported within --pending-after: %s", k)
		}
	}
}
