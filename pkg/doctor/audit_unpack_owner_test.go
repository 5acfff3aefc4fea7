package doctor_test

import (
	"context"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/test/testenv"
)

// TestAuditUnpackConfigMapOwnedByAnotherGroup: a tenant's ConfigMap labelled olm.managed=true
// and owned by a kind CatalogSource of another API group is not one of OLM's unpack ConfigMaps,
// so its failed, unlabelled Job is no unpack Job: doctor applies pkg/unpack's rule, which now
// reads an ownerReference to a CatalogSource as pkg/catalog does (olm.IsCatalogSourceRef:
// operators.coreos.com/v1alpha1, as OLM writes it). A ConfigMap owned by OLM's CatalogSource
// still makes one. Fails before the fix: pkg/unpack read the kind only, and doctor reported the
// tenant's Job as OLM's (UnpackJobNameConflict and UnpackJobFailed).
func TestAuditUnpackConfigMapOwnedByAnotherGroup(t *testing.T) {
	env := testenv.Shared(t)
	c := env.Client
	ctx, cancel := context.WithTimeout(context.Background(), 2*testenv.Patience)
	defer cancel()
	const ns = "doctor-tenant-b"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	long := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	for name, apiVersion := range map[string]string{"forged": "evil.example.com/v1", "olms": olm.V1alpha1APIVersion} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: apiVersion, Kind: olm.CatalogSourceKind, Name: "cat", UID: "cat-uid"}}}}
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}}},
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
