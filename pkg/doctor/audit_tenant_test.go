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

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestAuditForgedUnpackOwner: issue 31's attack through a real apiserver. A tenant creates Jobs in
// its namespace whose ConfigMap ownerReference is made up (another group's kind ConfigMap, or a
// v1 ConfigMap whose name holds a shell command: the apiserver accepts any non-empty owner name)
// and makes them fail. Doctor reports no unpack failure for them and prints nothing built from the
// name. Fails before the fix: doctor printed `kubectl -n doctor-tenant-a delete
// job/unpack-x configmap/x; kubectl create clusterrolebinding pwn ...` as the fix.
func TestAuditForgedUnpackOwner(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.Patience)
	defer cancel()
	const ns = "doctor-tenant-a"
	const attack = "x; kubectl create clusterrolebinding pwn --clusterrole=cluster-admin --user=tenant-a; echo "
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// A ConfigMap of the tenant's own, not OLM's: a reference to it, with its UID, makes no unpack Job.
	own := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "own"}}
	if err := c.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	long := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for name, refs := range map[string][]metav1.OwnerReference{
		"unpack-x": {{APIVersion: "evil.example.com/v1", Kind: "ConfigMap", Name: attack, UID: "u1"}, {APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u2"}},
		"unpack-y": {{APIVersion: "v1", Kind: "ConfigMap", Name: attack, UID: "u3"}},
		"unpack-z": {{APIVersion: "v1", Kind: "ConfigMap", Name: own.Name, UID: own.UID}},
	} {
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}
		if err := c.Create(ctx, job); err != nil {
			t.Fatalf("creating Job %s: %v", name, err)
		}
		job.Status.StartTime = &long
		for _, typ := range []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobFailed} {
			job.Status.Conditions = append(job.Status.Conditions, batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded",
				Message: "Job was active longer than specified deadline", LastProbeTime: metav1.Now(), LastTransitionTime: metav1.Now()})
		}
		if err := c.Status().Update(ctx, job); err != nil {
			t.Fatalf("failing Job %s: %v", name, err)
		}
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
