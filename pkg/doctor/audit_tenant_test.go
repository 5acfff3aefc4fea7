package doctor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestAuditForgedUnpackOwner: issue 31's attack through a real apiserver. A tenant creates Jobs in
// its namespace whose ConfigMap ownerReference is made up (another group's kind ConfigMap, or a
// v1 ConfigMap whose name holds a shell command: the apiserver accepts any non-empty owner name)
// and makes them fail. Doctor reports no unpack failure for them and prints nothing built from the
// name. Fails before the fix: doctor printed `kubectl -n doctor-tenant-a delete
// job/unpack-x configmap/x; kubectl create clusterrolebinding pwn ...` as the fix.
func TestAuditForgedUnpackOwner(t *testing.T) {
	const ns = "doctor-tenant-a"
	const attack = "x; kubectl create clusterrolebinding pwn --clusterrole=cluster-admin --user=tenant-a; echo "
	ctx, c := tenantNamespace(t, ns)
	// A ConfigMap of the tenant's own, not OLM's: a reference to it, with its UID, makes no unpack Job.
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"}}
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	for name, refs := range map[string][]metav1.OwnerReference{
		"unpack-x": {{APIVersion: "evil.example.com/v1", Kind: "ConfigMap", Name: attack, UID: "u1"}, {APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u2"}},
		"unpack-y": {{APIVersion: "v1", Kind: "ConfigMap", Name: attack, UID: "u3"}},
		"unpack-z": {{APIVersion: "v1", Kind: "ConfigMap", Name: own.Name, UID: own.UID}},
	} {
		createFailedJob(ctx, t, c, ns, name, refs)
	}

	opts := doctor.DefaultOptions()
	opts.Namespace, opts.Recheck = ns, 0
	r, err := doctor.Audit(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Checked["Jobs"] != 3 {
		t.Fatalf("checked %v, want the 3 Jobs read", r.Checked)
	}
	var table, js bytes.Buffer
	if err := doctor.WriteTable(&table, r); err != nil {
		t.Fatal(err)
	}
	if err := doctor.WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Findings {
		if f.Kind == "Job" {
			t.Errorf("a tenant's Job reported as OLM's: %+v", f)
		}
	}
	var back doctor.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(table.String(), "clusterrolebinding") || strings.Contains(js.String(), "clusterrolebinding") {
		t.Errorf("doctor prints the forged name:\n%s\n%s", table.String(), js.String())
	}
}

// TestAuditUnpackConfigMapOwnedByAnotherGroup: a tenant's ConfigMap labelled olm.managed=true
// and owned by a kind CatalogSource of another API group is not one of OLM's unpack ConfigMaps,
// so its failed, unlabelled Job is no unpack Job: doctor applies pkg/unpack's rule, which now
// reads an ownerReference to a CatalogSource as pkg/catalog does (olm.IsCatalogSourceRef:
// operators.coreos.com/v1alpha1, as OLM writes it). A ConfigMap owned by OLM's CatalogSource
// still makes one. Fails before the fix: pkg/unpack read the kind only, and doctor reported the
// tenant's Job as OLM's (UnpackJobNameConflict and UnpackJobFailed).
func TestAuditUnpackConfigMapOwnedByAnotherGroup(t *testing.T) {
	const ns = "doctor-tenant-b"
	ctx, c := tenantNamespace(t, ns)
	for name, apiVersion := range map[string]string{"forged": "evil.example.com/v1", "olms": olm.V1alpha1APIVersion} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: olm.CatalogSourceKind, Name: "cat", UID: "cat-uid"}}}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		job := createFailedJob(ctx, t, c, ns, name, []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}})
		t.Cleanup(func() { // the shared apiserver runs no namespace controller: other audits would find them
			for _, o := range []client.Object{job, cm} {
				if err := c.Delete(context.Background(), o, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
					t.Errorf("deleting %s: %v", o.GetName(), err)
				}
			}
		})
	}

	opts := doctor.DefaultOptions()
	opts.Namespace, opts.Recheck = ns, 0
	r, err := doctor.Audit(ctx, c, opts)
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string][]string{} // Job -> checks
	for _, f := range r.Findings {
		if f.Kind == "Job" {
			checks[f.Name] = append(checks[f.Name], f.Check)
		}
	}
	if len(checks["forged"]) != 0 {
		t.Errorf("the Job of a ConfigMap owned by another group's CatalogSource reported as OLM's: %v", checks["forged"])
	}
	if len(checks["olms"]) != 2 {
		t.Errorf("the Job of a ConfigMap owned by OLM's CatalogSource: checks %v, want UnpackJobNameConflict and UnpackJobFailed", checks["olms"])
	}
}

// tenantNamespace creates namespace ns in the shared envtest apiserver, and returns its client and
// a context that ends with the test.
func tenantNamespace(t *testing.T, ns string) (context.Context, client.Client) {
	t.Helper()
	c := testenv.Shared(t).Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.Patience)
	t.Cleanup(cancel)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ctx, c
}

// createFailedJob creates a Job in ns with owner references refs and fails it, as the Job
// controller does on its deadline.
func createFailedJob(ctx context.Context, t *testing.T, c client.Client, ns, name string, refs []metav1.OwnerReference) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
	if err := c.Create(ctx, job); err != nil {
		t.Fatalf("creating Job %s: %v", name, err)
	}
	long := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	job.Status.StartTime = &long
	for _, typ := range []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobFailed} {
		job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded",
			Message: "Job was active longer than specified deadline", LastProbeTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	}
	if err := c.Status().Update(ctx, job); err != nil {
		t.Fatalf("failing Job %s: %v", name, err)
	}
	return job
}
