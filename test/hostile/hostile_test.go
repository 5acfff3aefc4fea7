package hostile

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/realolm"
	"github.com/olmguard/olmguard/test/scenario"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestOneKubectl: the POSIX check of doctor's commands accepts a quoted kubectl invocation and
// refuses what a tenant's name would smuggle in.
func TestOneKubectl(t *testing.T) {
	for cmd, ok := range map[string]bool{
		"kubectl -n tenant-a delete job/unpack-x configmap/x":                           true,
		"kubectl -n 'tenant-a' delete 'job/unpack-x' 'configmap/x; echo'":               true,
		"kubectl -n tenant-a delete configmap/x; kubectl create clusterrolebinding pwn": false,
		"kubectl get cm && rm -rf /":                                                    false,
		"kubectl get cm $(id)":                                                          false,
		"kubectl get cm `id`":                                                           false,
		"kubectl get cm > /etc/passwd":                                                  false,
		"X=1 kubectl get cm":                                                            false,
		"sh -c 'kubectl get cm'":                                                        false,
		"kubectl get cm *":                                                              false,
		"kubectl get cm | sh":                                                           false,
		"kubectl get cm \"$HOME\"":                                                      false,
		"kubectl get cm &":                                                              false,
		"kubectl annotate subscription s olmguard.io/resync=1 --overwrite":              true,
	} {
		if err := oneKubectl(cmd); (err == nil) != ok {
			t.Errorf("oneKubectl(%q) = %v, want ok=%v", cmd, err, ok)
		}
	}
}

// hostileName is the ownerReference name of item 1: a shell command line with terminal escapes
// (ESC, an OSC 8 link, a CSI cursor move, a C1 CSI) that doctor pasted into its fix.
const hostileName = "x configmap/y; kubectl create clusterrolebinding pwn --clusterrole=cluster-admin --user=tenant-a; echo " +
	"\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07\x1b[2A\x1b[2K\u009b31m\u202e"

// escapes is what item 1's variations put in fields doctor may print.
const escapes = "\x1b[31mred\x1b]8;;https://evil.example/\x07link\x1b]8;;\x07\x1b[1A\u202e"

// TestHostileTenant runs every attack of issue 31 side by side, each as a tenant with edit in a
// namespace of its own, against OLM v0.46.0 and olmguard installed as the README says.
func TestHostileTenant(t *testing.T) {
	e := startEnv(t)
	// OLM and the controllers settle after the victim's install before any attack starts.
	e.settledSnapshot(t)
	t.Run("attacks", func(t *testing.T) {
		t.Run("doctor prints tenant names (item 1)", e.attackDoctor)
		t.Run("uninstall deletes a shared ClusterRole (item 2)", e.attackSharedClusterRole)
		t.Run("forged AdmissionReview (item 3)", e.attackForgedReview)
		t.Run("CSV claims another's CRD (item 5)", e.attackClaimedCRD)
		t.Run("pod labelled as a catalog pod (item 6)", e.attackCatalogLabel)
		t.Run("finalizer guard skipped by olm.copiedFrom (item 7)", e.attackCopiedFrom)
		// Item 8 (chart and manifests safe by default) is no runtime attack: the chart tests
		// cover it.
	})
	// Last and alone: OLM resolves the flooded namespace's 200 MB of Subscriptions again and
	// again, which would slow the installs the other attacks wait for.
	t.Run("big Subscriptions (item 4)", e.attackBigSubscriptions)
}

// attackDoctor (item 1). A Job with an ownerReference of kind ConfigMap in an unknown group whose
// name is a shell command line with terminal escapes, made to fail (its pod can never be
// scheduled and its deadline is 1 s: DeadlineExceeded); a second ownerReference to a ConfigMap
// of the tenant's (apiVersion v1) makes it pass the audit's unpack-Job selection, and the garbage
// collector never removes it (an unresolvable owner kind is never judged absent). Variations:
// escape bytes in a Subscription's spec.channel, spec.name and spec.source (OLM copies them into
// its conditions) and in annotations. A CatalogSource is no variation: `edit` may not create one
// (OLM's aggregated rules). Then doctor -A runs as the cluster admin.
// Fails before the fix: doctor's table printed
// `kubectl -n tenant-a-doctor delete job/unpack-x configmap/x configmap/y; kubectl create
// clusterrolebinding pwn ...` with the raw ESC/OSC 8/CSI bytes, and the JSON report had no
// commands field.
func (e *env) attackDoctor(t *testing.T) {
	t.Parallel()
	tn := e.newTenant(t, "doctor")
	before := e.snapshot(t)
	ctx := context.Background()
	decoy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "decoy", Namespace: tn.ns}}
	if err := tn.client.Create(ctx, decoy); err != nil {
		t.Fatal(err)
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "unpack-x", Namespace: tn.ns,
		Annotations: map[string]string{"note": escapes},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "evil.example.com/v1", Kind: "ConfigMap", Name: hostileName, UID: "00000000-0000-0000-0000-000000000001"},
			{APIVersion: "v1", Kind: "ConfigMap", Name: decoy.Name, UID: decoy.UID}}},
		Spec: batchv1.JobSpec{ActiveDeadlineSeconds: ptr.To[int64](1), BackoffLimit: ptr.To[int32](0),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector: map[string]string{"hostile.olmguard.io/no-such-node": "true"},
				Containers:   []corev1.Container{{Name: "c", Image: "olmguard.test/none"}}}}}}
	if err := tn.client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	sub := realolm.NewSubscription(tn.ns, "escapes", Xi, v1alpha1.ApprovalManual, "")
	sub.Annotations = map[string]string{"note": escapes}
	sub.Spec.Channel, sub.Spec.Package, sub.Spec.CatalogSource, sub.Spec.CatalogSourceNamespace = "stable"+escapes, "xi"+escapes, "cat"+escapes, tn.ns
	if err := tn.client.Create(ctx, sub); err != nil {
		t.Logf("a Subscription with escape bytes in its spec was refused: %v", err)
	}
	testenv.Eventually(t, "the Job fails (DeadlineExceeded)", func(ctx context.Context) (bool, error) {
		got := &batchv1.Job{}
		err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(job), got)
		for _, c := range got.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return true, err
			}
		}
		return false, err
	})
	table, findings := e.runDoctor(t)
	if strings.Contains(table, "kubectl create clusterrolebinding pwn") && !strings.Contains(table, "'x configmap/y; kubectl create clusterrolebinding pwn") {
		t.Logf("doctor's table holds the tenant's command line unquoted")
	}
	// Not asserted: after the fix the unpack-failure check takes only Jobs owned by an OLM unpack
	// ConfigMap that exists with that UID (pkg/unpack's rule), which this Job is not.
	t.Logf("doctor reports the Job: %v", slices.ContainsFunc(findings, func(f doctorFinding) bool { return f.Namespace == tn.ns && f.Name == job.Name }))
	e.after(t, tn, before)
}

// attackSharedClusterRole (item 2). The victim (tenant-b, installed by the cluster admin) runs Mu
// v1.0.0; the tenant installs Mu v2.0.0 in its namespace (a Subscription with startingCSV: edit
// allows it), OLM relabels the bundled ClusterRole for the tenant's newer CSV, and the tenant
// uninstalls (deletes its Subscription and CSV: edit allows both). The bundled ClusterRole the
// victim's v1 uses must survive (the snapshot; stock OLM keeps it).
// Fails before the fix: olmguard deleted ClusterRole mu-bundled-reader through cleanup.Owned's
// name-only path while the victim's mu.v1.0.0 still ran.
func (e *env) attackSharedClusterRole(t *testing.T) {
	t.Parallel()
	tn := e.newTenant(t, "uninstall")
	before := e.snapshot(t)
	ctx := context.Background()
	sub := realolm.NewSubscription(tn.ns, "mu", Mu, v1alpha1.ApprovalAutomatic, Mu.CSVName("2.0.0"))
	if err := tn.client.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: Mu.CSVName("2.0.0")}}
	for _, err := range []error{realolm.CSVSucceeded(ctx, e.c.Client, tn.ns, csv.Name), realolm.SubscriptionAtLatest(ctx, e.c.Client, tn.ns, sub.Name),
		realolm.NoPlanInstalling(ctx, e.c.Client, tn.ns), e.c.Client.Get(ctx, client.ObjectKeyFromObject(csv), csv)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.ClusterRole{}
	if err := e.c.Client.Get(ctx, client.ObjectKey{Name: Mu.BundledClusterRole()}, role); err != nil {
		t.Fatal(err)
	}
	t.Logf("bundled ClusterRole %s labelled %s=%s/%s", role.Name, olm.OwnerLabel, role.Labels[olm.OwnerNamespaceLabel], role.Labels[olm.OwnerLabel])
	if err := tn.client.Delete(ctx, sub); err != nil {
		t.Fatal(err)
	}
	if err := tn.client.Delete(ctx, csv); err != nil {
		t.Fatal(err)
	}
	if err := realolm.Gone(ctx, e.c.Client, csv); err != nil {
		t.Fatal(err)
	}
	if err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(role), &rbacv1.ClusterRole{}); err != nil {
		t.Errorf("after the tenant's uninstall of %s, the bundled ClusterRole %s that %s's %s uses: %v",
			csv.Name, role.Name, VictimNamespace, Mu.CSVName("1.0.0"), err)
	}
	e.after(t, tn, before)
}

// attackForgedReview (item 3). The tenant, from the host as a pod of its namespace would, POSTs
// AdmissionReviews about the victim's namespace straight to the webhook's port: an InstallPlan
// CREATE (the F1 mutation lists the namespace's Subscriptions), an InstallPlan UPDATE and a
// Subscription CREATE (the policies read the namespace's Subscriptions). No answer may carry the
// victim's Subscription names or UIDs. With clientAuthEnv=1 (the webhook authenticates the
// kube-apiserver's calls, which present a client certificate through the AdmissionConfiguration
// test/cluster passes to kube-apiserver) the forged calls must be refused; with default flags the
// webhook answers anyone, as docs/webhook-auth.md says, and the leak shows.
// Fails before the fix: the mutate answer's patch named the victim's Subscriptions victim-mu and
// victim-nu with their UIDs (default flags; the fix's flags do not exist before it).
func (e *env) attackForgedReview(t *testing.T) {
	if clientAuth.caFile == "" {
		// What a caller learns with default flags is documented, not prevented
		// (docs/webhook-auth.md, SECURITY.md): the tier proves the setting that prevents it.
		t.Skipf("with default flags the webhook answers any caller that reaches its port (docs/webhook-auth.md); %s=1 runs this attack against client authentication", clientAuthEnv)
	}
	t.Parallel()
	tn := e.newTenant(t, "forged")
	before := e.snapshot(t)
	plan := &v1alpha1.InstallPlan{TypeMeta: metav1.TypeMeta{APIVersion: olm.V1alpha1APIVersion, Kind: olm.InstallPlanKind},
		ObjectMeta: metav1.ObjectMeta{Name: "forged", Namespace: VictimNamespace},
		Spec:       v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{Nu.CSVName("1.0.0"), Mu.CSVName("2.0.0")}, Approval: v1alpha1.ApprovalAutomatic}}
	dropped := plan.DeepCopy()
	sub := realolm.NewSubscription(VictimNamespace, "forged", Nu, v1alpha1.ApprovalManual, "")
	sub.TypeMeta = metav1.TypeMeta{APIVersion: olm.V1alpha1APIVersion, Kind: olm.SubscriptionKind}
	for _, r := range []struct {
		path     string
		op       admissionv1.Operation
		resource string
		obj, old runtime.Object
	}{
		{olmguard.MutateInstallPlansPath, admissionv1.Create, "installplans", plan, nil},
		{olmguard.ValidateInstallPlansPath, admissionv1.Update, "installplans", dropped, plan},
		{olmguard.ValidateSubscriptionsPath, admissionv1.Create, "subscriptions", sub, nil},
	} {
		body := forgedReview(t, r.op, r.resource, r.obj, r.old)
		answer := post(t, e.olmguard.WebhookAddress, r.path, body)
		if clientAuth.caFile != "" && strings.HasPrefix(answer, "HTTP 200") {
			t.Errorf("with client authentication, a forged review without a certificate got an answer from %s: %.300s", r.path, answer)
		}
		// The victim's namespace is what the attacker sent: only what it did not know counts.
		tn.rec.add(strings.ReplaceAll(r.path+"\n"+answer, VictimNamespace, "<victim namespace>"))
	}
	e.after(t, tn, before)
}

// forgedReview is an AdmissionReview as the apiserver would send it for obj in the victim's
// namespace.
func forgedReview(t *testing.T, op admissionv1.Operation, resource string, obj, old runtime.Object) []byte {
	t.Helper()
	raw := func(o runtime.Object) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	gvr := metav1.GroupVersionResource{Group: olm.Group, Version: "v1alpha1", Resource: resource}
	m := obj.(metav1.Object)
	review := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: types.UID("forged-" + resource), Resource: gvr, RequestResource: &gvr,
			Kind:      metav1.GroupVersionKind{Group: olm.Group, Version: "v1alpha1", Kind: obj.GetObjectKind().GroupVersionKind().Kind},
			Namespace: m.GetNamespace(), Name: m.GetName(), Operation: op,
			UserInfo: authenticationUser(), Object: raw(obj), OldObject: raw(old)}}
	b, err := json.Marshal(review)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// post sends body to the webhook at addr as any pod could (it verifies no certificate, as curl -k).
func post(t *testing.T, addr, path string, body []byte) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the attacker's client
	resp, err := c.Post("https://"+addr+path, "application/json", bytes.NewReader(body))
	if err != nil {
		return "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var review admissionv1.AdmissionReview
	out := fmt.Sprintf("HTTP %d %s", resp.StatusCode, b)
	if json.Unmarshal(b, &review) == nil && review.Response != nil {
		out += "\npatch: " + string(review.Response.Patch) + "\nwarnings: " + strings.Join(review.Response.Warnings, "\n")
	}
	return out
}

// bigSubscriptionsEnv overrides item 4's count of big Subscriptions (default 200, as measured in
// issue 31).
const bigSubscriptionsEnv = "OLMGUARD_HOSTILE_BIG_SUBSCRIPTIONS"

// webhookMemoryLimit is the webhook pod's memory limit in the manifests and the chart.
const webhookMemoryLimit = 128 << 20

// attackBigSubscriptions (item 4). The tenant creates 200 Subscriptions of ~900 KB each
// (spec.config.env; under etcd's 1.5 MB request limit) in its namespace, then one more. The
// webhook, which reads the namespace's Subscriptions on a Subscription CREATE and an InstallPlan
// UPDATE, must stay under its pod's 128 MiB (peak RSS, VmHWM), keep serving, and its enforced
// policy (InstallPlanOwnerDrop, enforce by default) must still decide: an update dropping a live
// Subscription's ownerReference from a plan is denied (as it is before the flood: the positive
// control).
// Fails before the fix: the webhook's peak RSS was 269 to 880 MiB in runs here (issue 31: 1,030 MiB), and after
// the flood the owner drop was let through (the webhook's read outlasted the call: fail open).
func (e *env) attackBigSubscriptions(t *testing.T) {
	n := 200
	if v := os.Getenv(bigSubscriptionsEnv); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	tn := e.newTenant(t, "flood")
	before := e.snapshot(t)
	ctx := context.Background()
	pad := strings.Repeat("x", 900<<10)
	big := func(i int) *unstructured.Unstructured {
		s := realolm.NewSubscription(tn.ns, fmt.Sprintf("big-%03d", i), Xi, v1alpha1.ApprovalManual, "")
		// Another package each (no duplicate-package warning) from a catalog that does not exist:
		// OLM only records that it cannot resolve them.
		s.Spec.Package, s.Spec.CatalogSource, s.Spec.CatalogSourceNamespace = fmt.Sprintf("big-%03d", i), "none", tn.ns
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			panic(err)
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetAPIVersion(olm.V1alpha1APIVersion)
		u.SetKind(olm.SubscriptionKind)
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "PAD", "value": pad}}, "spec", "config", "env")
		return u
	}
	// Positive control, before the flood: the enforced policy denies the owner drop.
	first := big(-1)
	unstructured.RemoveNestedField(first.Object, "spec", "config")
	if err := tn.client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := e.ownerDropDenied(ctx, tn.ns, "before", first); err != nil {
		t.Fatalf("positive control, before the flood: %v", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	start := time.Now()
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := tn.client.Create(ctx, big(i)); err != nil {
					errs <- fmt.Errorf("Subscription %d: %w", i, err)
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d Subscriptions of %d KB created in %s", n, len(pad)>>10, time.Since(start).Round(time.Second))
	last := big(n)
	if err := tn.client.Create(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := e.ownerDropDenied(ctx, tn.ns, "after", last); err != nil {
		t.Errorf("after the flood: %v", err)
	}
	peak, err := e.olmguard.Webhook.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("webhook peak RSS with %d Subscriptions of %d KB: %d MiB", n+1, len(pad)>>10, peak>>20)
	if peak > webhookMemoryLimit {
		t.Errorf("webhook peak RSS %d MiB, over its pod's limit of %d MiB", peak>>20, webhookMemoryLimit>>20)
	}
	e.after(t, tn, before)
	// The namespace goes, so that OLM stops resyncing 200 MB of Subscriptions.
	_ = e.c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tn.ns}})
}

// ownerDropDenied creates, as the cluster admin, plan name owned by sub, then updates it without
// that ownerReference: InstallPlanOwnerDrop (enforce by default) must deny the update, or the F1
// mutation put the ownerReference back; either way the plan keeps it.
func (e *env) ownerDropDenied(ctx context.Context, ns, name string, sub client.Object) error {
	plan := &v1alpha1.InstallPlan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.SubscriptionKind, Name: sub.GetName(), UID: sub.GetUID()}}},
		Spec: v1alpha1.InstallPlanSpec{ClusterServiceVersionNames: []string{"big.v1"}, Approval: v1alpha1.ApprovalManual}}
	if err := e.c.Client.Create(ctx, plan); err != nil {
		return err
	}
	plan.OwnerReferences = nil
	err := e.c.Client.Update(ctx, plan)
	if err != nil && (apierrors.IsForbidden(err) || strings.Contains(err.Error(), "denied")) {
		return nil
	}
	if err != nil {
		return err
	}
	// Or the F1 mutation (installplans.mutate, on UPDATE too) put the owner back before the policy
	// looked: the plan keeps it either way.
	if err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(plan), plan); err != nil {
		return err
	}
	if scenario.OwnedBy(plan, sub.GetUID()) {
		return nil
	}
	return fmt.Errorf("an update dropping Subscription %s's ownerReference from plan %s was let through (InstallPlanOwnerDrop, enforce; nor did the F1 mutation restore it)", sub.GetName(), name)
}

// attackClaimedCRD (item 5). With one verb more than edit, create on CSVs in its namespace (many
// clusters grant it; OLM's default aggregation does not), the tenant creates a CSV that claims two
// CRDs OLM did not install for it: Nu's (a live CSV of the victim owns it) and gadgets, left by an
// operator uninstalled earlier (OLM keeps CRDs and their data; no CSV owns it). The CSV opts in to
// operand cleanup (spec.cleanup.enabled) and the tenant deletes it. olmguard runs with its default
// operand cleanup opt-in and the administrator's grants on both kinds (README, Operand cleanup).
// No custom resource of either CRD may go: those the admin created in the tenant's namespace, and
// the victim's.
// Fails before the fix: olmguard deleted the admin's Gadget in the tenant's namespace (a CRD no
// CSV owns is deleted from the CSV's own claim); Nu's Widget stayed (claimed by a live CSV).
func (e *env) attackClaimedCRD(t *testing.T) {
	t.Parallel()
	tn := e.newTenant(t, "claim", rbacv1.PolicyRule{APIGroups: []string{olm.Group}, Resources: []string{"clusterserviceversions"}, Verbs: []string{"create"}})
	ctx := context.Background()
	notYours := []*unstructured.Unstructured{newWidget(Nu, tn.ns, "not-yours"), newGadget(tn.ns, "not-yours")}
	for _, o := range notYours {
		if err := e.c.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	before := e.snapshot(t)
	csv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": olm.V1alpha1APIVersion, "kind": olm.ClusterServiceVersionKind,
		"metadata": map[string]any{"namespace": tn.ns, "name": "claim.v1.0.0"},
		"spec": map[string]any{"displayName": "claim", "version": "1.0.0", "cleanup": map[string]any{"enabled": true},
			"installModes": []any{map[string]any{"type": "OwnNamespace", "supported": true}, map[string]any{"type": "SingleNamespace", "supported": true},
				map[string]any{"type": "MultiNamespace", "supported": false}, map[string]any{"type": "AllNamespaces", "supported": true}},
			"customresourcedefinitions": map[string]any{"owned": []any{map[string]any{"name": Nu.CRDName(), "version": "v1", "kind": "Widget"},
				map[string]any{"name": "gadgets." + LeftoverGroup, "version": "v1", "kind": "Gadget"}}},
			"install": map[string]any{"strategy": "deployment", "spec": map[string]any{"deployments": []any{}}}}}}
	if err := tn.client.Create(ctx, csv); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "olmguard's cleanup finalizer on the tenant's CSV, and OLM working on it", func(ctx context.Context) (bool, error) {
		got := &v1alpha1.ClusterServiceVersion{}
		err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(csv), got)
		return slices.Contains(got.Finalizers, olmguard.CleanupFinalizer) && got.Status.Phase != "", err
	})
	if err := tn.client.Delete(ctx, csv); err != nil {
		t.Fatal(err)
	}
	if err := realolm.Gone(ctx, e.c.Client, csv); err != nil {
		t.Fatal(err)
	}
	for _, o := range append(notYours, newWidget(Nu, VictimNamespace, "victim-data"), newGadget(VictimNamespace, "victim-data")) {
		if err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopy()); err != nil {
			t.Errorf("after the tenant's CSV claiming %s was deleted, %s %s/%s: %v", o.GetKind(), o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	e.after(t, tn, before)
}

// attackCatalogLabel (item 6). The tenant creates a pod with only the label olm.catalogSource,
// bound (spec.nodeName) to a node of its own that then turns NotReady. olmguard's controller runs
// with --catalog-pod-grace=2s. Positive control: a catalog pod of the victim's namespace on the
// same node, owned by an existing CatalogSource (the cluster admin's), IS deleted by olmguard;
// the tenant's pod must not be. The controller's queue works in order, and the tenant's
// namespace sorts first: when the control is gone, the tenant's pod was decided.
// Fails before the fix: the tenant's pod was force-deleted like the catalog pod.
func (e *env) attackCatalogLabel(t *testing.T) {
	t.Parallel()
	tn := e.newTenant(t, "pod")
	ctx := context.Background()
	node := HostileNode
	cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: VictimNamespace, Name: "victim-catalog"},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: "192.0.2.1:50051", DisplayName: "victim"}}
	if err := e.c.Client.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	pod := func(ns, name string, labels map[string]string, owners []metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, OwnerReferences: owners},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "registry", Image: "olmguard.test/none"}}}}
	}
	control := pod(VictimNamespace, "victim-catalog-pod", map[string]string{olm.CatalogSourceLabel: cs.Name, RecoveredLabel: "true"},
		[]metav1.OwnerReference{{APIVersion: olm.V1alpha1APIVersion, Kind: olm.CatalogSourceKind, Name: cs.Name, UID: cs.UID, Controller: ptr.To(true)}})
	if err := e.c.Client.Create(ctx, control); err != nil {
		t.Fatal(err)
	}
	lookalike := pod(tn.ns, "lookalike", map[string]string{olm.CatalogSourceLabel: "x"}, nil)
	if err := tn.client.Create(ctx, lookalike); err != nil {
		t.Fatal(err)
	}
	before := e.snapshot(t)
	if err := e.c.FailNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.c.RecoverNode(context.Background(), node) })
	if err := e.c.WaitNodeReady(ctx, node, false); err != nil {
		t.Fatal(err)
	}
	if err := realolm.Gone(ctx, e.c.Client, control); err != nil {
		t.Fatalf("positive control: olmguard did not recover the catalog pod of an existing CatalogSource: %v", err)
	}
	// olmguard, not OLM, deleted it: its controller says so.
	testenv.Eventually(t, "the controller logs the recovery of "+control.Name, func(context.Context) (bool, error) {
		b, err := os.ReadFile(e.olmguard.Controller.Log)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "deleted catalog pod stranded") && strings.Contains(line, control.Name) {
				return true, err
			}
		}
		return false, err
	})
	got := &corev1.Pod{}
	if err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(lookalike), got); err != nil || got.UID != lookalike.UID || got.DeletionTimestamp != nil {
		t.Errorf("the tenant's pod with only the label %s was deleted on its NotReady node (err %v)", olm.CatalogSourceLabel, err)
	}
	e.after(t, tn, before)
}

// attackCopiedFrom (item 7). With one verb more than edit, update on CSVs in its namespace, the
// tenant tries to skip olmguard's cleanup of its own install (Xi): it labels the CSV
// olm.copiedFrom (as OLM labels its copies, which the finalizer guard lets go) and removes the
// finalizer, in two updates and in one. The guard (--policy-cleanup-finalizer, enforce by default)
// must deny the removal, or the mutating webhook put the finalizer back: either way the CSV keeps
// it. OLM may still take the labelled CSV for a dangling copy and delete it: the ClusterRole Xi's
// operators share stays for the admin's install in SecondVictimNamespace (the snapshot), since a
// CSV counts as a copy for olmguard's shared-object rule only by OLM's status.reason Copied.
// Fails before the fix: both removals were allowed (the guard judged only the new object, which
// carried olm.copiedFrom).
func (e *env) attackCopiedFrom(t *testing.T) {
	t.Parallel()
	for _, oneUpdate := range []bool{false, true} {
		name := "two updates"
		if oneUpdate {
			name = "one update"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ns := "finalizer2"
			if oneUpdate {
				ns = "finalizer1"
			}
			tn := e.newTenant(t, ns, rbacv1.PolicyRule{APIGroups: []string{olm.Group}, Resources: []string{"clusterserviceversions"}, Verbs: []string{"update"}})
			before := e.snapshot(t)
			ctx := context.Background()
			if err := tn.client.Create(ctx, realolm.NewSubscription(tn.ns, "xi", Xi, v1alpha1.ApprovalAutomatic, "")); err != nil {
				t.Fatal(err)
			}
			csv := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: tn.ns, Name: Xi.CSVName("1.0.0")}}
			if err := realolm.CSVSucceeded(ctx, e.c.Client, tn.ns, csv.Name); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "olmguard's cleanup finalizer on "+csv.Name, func(ctx context.Context) (bool, error) {
				err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(csv), csv)
				return slices.Contains(csv.Finalizers, olmguard.CleanupFinalizer), err
			})
			// update returns what the apiserver stored for the tenant's own write: the claim is
			// about that write, not about later writers (OLM may delete the labelled CSV, and
			// olmguard then releases its finalizer after its cleanup).
			update := func(label, unfinalize bool) (*v1alpha1.ClusterServiceVersion, error) {
				for {
					got := &v1alpha1.ClusterServiceVersion{}
					if err := tn.client.Get(ctx, client.ObjectKeyFromObject(csv), got); err != nil {
						return nil, err
					}
					if label {
						if got.Labels == nil {
							got.Labels = map[string]string{}
						}
						got.Labels[olm.CopiedFromLabel] = tn.ns
					}
					if unfinalize {
						got.Finalizers = slices.DeleteFunc(got.Finalizers, func(f string) bool { return f == olmguard.CleanupFinalizer })
					}
					err := tn.client.Update(ctx, got)
					if !apierrors.IsConflict(err) {
						return got, err
					}
				}
			}
			var stored *v1alpha1.ClusterServiceVersion
			var err error
			if oneUpdate {
				stored, err = update(true, true)
			} else if _, err = update(true, false); err == nil {
				stored, err = update(false, true)
			} else {
				t.Fatalf("labelling the CSV %s: %v", olm.CopiedFromLabel, err)
			}
			t.Logf("the removal: %v", err)
			// Denied, or the finalizer put back by the mutating webhook: either way the tenant's
			// write leaves it.
			switch {
			case err != nil && !apierrors.IsForbidden(err):
				t.Fatalf("the removal failed otherwise than by olmguard's denial: %v", err)
			case err == nil && !slices.Contains(stored.Finalizers, olmguard.CleanupFinalizer):
				t.Errorf("the tenant removed %s from its CSV after labelling it %s (%s)", olmguard.CleanupFinalizer, olm.CopiedFromLabel, name)
			}
			// And as long as the CSV is not deleted, it keeps it.
			got := &v1alpha1.ClusterServiceVersion{}
			if err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(csv), got); err == nil && got.UID == csv.UID && got.DeletionTimestamp == nil &&
				!slices.Contains(got.Finalizers, olmguard.CleanupFinalizer) {
				t.Errorf("the CSV %s lost %s without being deleted (%s)", csv.Name, olmguard.CleanupFinalizer, name)
			}
			// Deleted, the CSV labelled as a copy is still cleaned up and olmguard's finalizer
			// released: the controller's cache leaves out CSVs labelled olm.copiedFrom but those the
			// webhook labelled tracked (issue 32). OLM's own finalizer may stay: OLM ignores a CSV
			// labelled olm.copiedFrom. Fails without the tracking label: olmguard's stays too.
			if err := tn.client.Delete(ctx, &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Namespace: csv.Namespace, Name: csv.Name}},
				client.Preconditions{UID: &csv.UID}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				t.Fatalf("the tenant deleting its CSV: %v", err)
			}
			testenv.EventuallyExplained(t, "olmguard's cleanup of "+csv.Name+", labelled as a copy, done and its finalizer released", func(ctx context.Context) (bool, string, error) {
				got := &v1alpha1.ClusterServiceVersion{}
				err := e.c.Client.Get(ctx, client.ObjectKeyFromObject(csv), got)
				if apierrors.IsNotFound(err) {
					return true, "", nil
				}
				if err != nil {
					return false, "", nil // the next poll reads again
				}
				return got.UID != csv.UID || !slices.Contains(got.Finalizers, olmguard.CleanupFinalizer),
					fmt.Sprintf("deleted %v, labels %v, finalizers %v", got.DeletionTimestamp, got.Labels, got.Finalizers), nil
			})
			e.after(t, tn, before)
		})
	}
}

// authenticationUser is the requester a forged review claims: OLM's catalog-operator.
func authenticationUser() authenticationv1.UserInfo {
	return authenticationv1.UserInfo{Username: "system:serviceaccount:" + cluster.OLMNamespace + ":olm-operator-serviceaccount"}
}
