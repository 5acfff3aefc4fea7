package olmsim

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/testenv"
)

// defaultUnpackTimeoutSeconds is the catalog-operator's --bundle-unpack-timeout default (10m).
const defaultUnpackTimeoutSeconds = 600

// UnpackResult is the state of one bundle's unpacking.
type UnpackResult struct {
	// Name is OLM's unpack name: the ConfigMap's, and the Job's as OLM created it.
	Name      string
	Job       *batchv1.Job
	ConfigMap *corev1.ConfigMap
	Complete  bool
	Failed    bool
}

// unpackedBundleReference is the JSON OLM stores in a step's manifest for unpacked bundles.
type unpackedBundleReference struct {
	Kind                   string `json:"kind"`
	Name                   string `json:"name"`
	Namespace              string `json:"namespace"`
	CatalogSourceName      string `json:"catalogSourceName"`
	CatalogSourceNamespace string `json:"catalogSourceNamespace"`
	Replaces               string `json:"replaces"`
}

// UnpackBundle is the bundle unpacker for one lookup: the ConfigMap, the Job (found by OLM's
// version-specific rules), and, once the Job completes, the bundle content in the ConfigMap.
// subNamespace is the namespace of the Subscription; its OperatorGroup may set the Job deadline.
func (s *Sim) UnpackBundle(ctx context.Context, cat *Catalog, b *Bundle, subNamespace string) (UnpackResult, error) {
	name := olm.UnpackName(b.Image)
	res := UnpackResult{Name: name}
	cs := &v1alpha1.CatalogSource{}
	if err := s.Client.Get(ctx, cat.key(), cs); err != nil {
		return res, fmt.Errorf("catalog source %s: %w", cat.key(), err)
	}
	cm, err := s.ensureUnpackConfigMap(ctx, cs, name)
	if err != nil {
		return res, err
	}
	res.ConfigMap = cm
	if err := s.ensureUnpackRBAC(ctx, cm); err != nil {
		return res, err
	}
	deadline, err := s.unpackDeadline(ctx, subNamespace)
	if err != nil {
		return res, err
	}
	job, err := s.ensureJob(ctx, s.unpackJob(cm, b, deadline))
	if err != nil || job == nil {
		return res, err
	}
	if s.CompleteJobs {
		if err := s.completeJob(ctx, job); err != nil {
			return res, err
		}
	}
	res.Job = job
	for _, c := range job.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		res.Failed = res.Failed || c.Type == batchv1.JobFailed
		res.Complete = res.Complete || c.Type == batchv1.JobComplete
	}
	if res.Complete && len(cm.Data) == 0 {
		// What the extract container does: write the bundle into the ConfigMap.
		cm.Data = map[string]string{"bundle": b.CSVName}
		if cm.Annotations == nil {
			cm.Annotations = map[string]string{}
		}
		// opm writes the image, the encoding of the manifests and the bundle's own annotations.
		cm.Annotations[olm.SourceImageAnnotation] = b.Image
		cm.Annotations["olm.contentEncoding"] = "gzip+base64"
		for k, v := range b.metadataAnnotations() {
			cm.Annotations[k] = v
		}
		if err := s.Client.Update(ctx, cm); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (s *Sim) ensureUnpackConfigMap(ctx context.Context, cs *v1alpha1.CatalogSource, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	err := s.Client.Get(ctx, types.NamespacedName{Namespace: cs.Namespace, Name: name}, cm)
	if err == nil || !apierrors.IsNotFound(err) {
		return cm, err
	}
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: cs.Namespace,
		Labels:          map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
		OwnerReferences: []metav1.OwnerReference{ownerRef(cs, v1alpha1.GroupVersion.WithKind(olm.CatalogSourceKind), false, false)},
	}}
	if err := s.Client.Create(ctx, cm); err != nil {
		return nil, fmt.Errorf("creating unpack ConfigMap: %w", err)
	}
	return cm, nil
}

// ensureUnpackRBAC creates the Role, RoleBinding and ServiceAccount named like the ConfigMap.
func (s *Sim) ensureUnpackRBAC(ctx context.Context, cm *corev1.ConfigMap) error {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace,
			Labels:          map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
			OwnerReferences: []metav1.OwnerReference{ownerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"), false, false)}}
	}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta()},
		&rbacv1.Role{ObjectMeta: meta(), Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"},
			ResourceNames: []string{cm.Name}, Verbs: []string{"create", "get", "update"}}}},
		&rbacv1.RoleBinding{ObjectMeta: meta(),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: cm.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: cm.Name, Namespace: cm.Namespace}}},
	}
	for _, o := range objs {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating unpack %T: %w", o, err)
		}
	}
	return nil
}

// unpackDeadline reads the OperatorGroup's bundle-unpack-timeout annotation ("0": no deadline).
func (s *Sim) unpackDeadline(ctx context.Context, ns string) (*int64, error) {
	v, err := s.operatorGroupAnnotation(ctx, ns, olm.BundleUnpackTimeoutAnnotation)
	if err != nil || v == "" {
		return ptr.To[int64](defaultUnpackTimeoutSeconds), err
	}
	d, err := parseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("failed to parse unpack timeout annotation(%s: %s): %w", olm.BundleUnpackTimeoutAnnotation, v, err)
	}
	if d == 0 {
		return nil, nil
	}
	return ptr.To(int64(d.Seconds())), nil
}

// unpackJob is the Job OLM wants for a bundle (bundle_unpacker.go job()).
func (s *Sim) unpackJob(cm *corev1.ConfigMap, b *Bundle, deadline *int64) *batchv1.Job {
	var labels map[string]string
	if s.Version.AtLeast(V0_26) { // older releases set no labels (OLM PR #3262's description)
		labels = map[string]string{olm.ManagedLabel: olm.ManagedLabelValue, olm.BundleUnpackRefLabel: cm.Name}
	}
	volumes := []corev1.VolumeMount{{Name: "bundle", MountPath: "/bundle"}, {Name: "util", MountPath: "/util"}}
	pod := corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		InitContainers: []corev1.Container{
			{Name: "util", Image: "quay.io/operator-framework/olm:latest", Command: []string{"/bin/cp", "-Rv", "/bin/cpb", "/util/cpb"}, VolumeMounts: volumes[1:]},
			{Name: "pull", Image: b.Image, Command: []string{"/util/cpb", "/bundle"}, VolumeMounts: volumes},
		},
		Containers: []corev1.Container{{
			Name: "extract", Image: "quay.io/operator-framework/opm:latest",
			Command:      []string{"opm", "alpha", "bundle", "extract", "-m", "/bundle/", "-n", cm.Namespace, "-c", cm.Name, "-z"},
			Env:          []corev1.EnvVar{{Name: "CONTAINER_IMAGE", Value: b.Image}},
			VolumeMounts: volumes[:1],
		}},
		Volumes: []corev1.Volume{
			{Name: "bundle", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "util", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
		NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
		Tolerations: []corev1.Toleration{
			{Key: "kubernetes.io/arch", Value: "amd64", Operator: corev1.TolerationOpEqual},
			{Key: "kubernetes.io/arch", Value: "arm64", Operator: corev1.TolerationOpEqual},
		},
	}
	if s.Version.AtLeast(V0_39) {
		pod.ServiceAccountName = cm.Name
	}
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, Labels: labels,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cm, corev1.SchemeGroupVersion.WithKind("ConfigMap"), false, false)}},
		Spec: batchv1.JobSpec{
			BackoffLimit:          ptr.To[int32](3),
			ActiveDeadlineSeconds: deadline,
			Template:              corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Labels: labels}, Spec: pod},
		},
	}
	if s.Version.AtLeast(V0_43) {
		job.Spec.TTLSecondsAfterFinished = ptr.To[int32](300)
	}
	return job
}

// ensureJob finds the unpack Job the way this OLM version does, creates it when none is found,
// and deletes one that no longer matches what OLM wants (the next pass recreates it). It returns
// nil and no error after such a delete.
func (s *Sim) ensureJob(ctx context.Context, fresh *batchv1.Job) (*batchv1.Job, error) {
	var candidates []batchv1.Job
	byName := func() error {
		job := &batchv1.Job{}
		err := s.Client.Get(ctx, client.ObjectKeyFromObject(fresh), job)
		if err == nil {
			if _, labelled := job.Labels[olm.BundleUnpackRefLabel]; !labelled || !s.Version.AtLeast(V0_26) {
				candidates = append(candidates, *job)
			}
		}
		return client.IgnoreNotFound(err)
	}
	switch {
	case !s.Version.AtLeast(V0_26): // by name only
		if err := byName(); err != nil {
			return nil, err
		}
	default: // by label; v0.29+ also by exact name (OLM PR #3262)
		list := &batchv1.JobList{}
		if err := s.Client.List(ctx, list, client.InNamespace(fresh.Namespace), client.MatchingLabels{olm.BundleUnpackRefLabel: fresh.Name}); err != nil {
			return nil, err
		}
		candidates = list.Items
		if s.Version.AtLeast(V0_29) {
			if err := byName(); err != nil {
				return nil, err
			}
		}
	}
	if len(candidates) == 0 {
		if err := s.Client.Create(ctx, fresh); err != nil {
			return nil, err // e.g. jobs.batch "<hash>" already exists (OLM issue #3210)
		}
		return fresh, nil
	}
	job := pickUnpackJob(candidates)
	if !equality.Semantic.DeepDerivative(fresh.OwnerReferences, job.OwnerReferences) ||
		!equality.Semantic.DeepDerivative(fresh.Spec, job.Spec) {
		err := s.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		return nil, client.IgnoreNotFound(err)
	}
	return job, nil
}

// pickUnpackJob is sortUnpackJobs: the newest Job that has not failed, else the newest failure.
func pickUnpackJob(jobs []batchv1.Job) *batchv1.Job {
	sort.SliceStable(jobs, func(i, j int) bool {
		fi, fj := jobFailed(&jobs[i]), jobFailed(&jobs[j])
		if fi != fj {
			return !fi
		}
		return jobs[j].CreationTimestamp.Before(&jobs[i].CreationTimestamp)
	})
	return &jobs[0]
}

func jobFailed(j *batchv1.Job) bool { return failedCondition(j).Status == corev1.ConditionTrue }

// failedCondition is the Job's Failed=True condition, or the zero condition.
func failedCondition(j *batchv1.Job) batchv1.JobCondition {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			return c
		}
	}
	return batchv1.JobCondition{}
}

// completeJob stands in for the Job controller and kubelet on control planes without them.
func (s *Sim) completeJob(ctx context.Context, job *batchv1.Job) error {
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed {
			return nil
		}
	}
	now := s.now()
	job.Status.StartTime = &now
	if s.FailJobs != nil && s.FailJobs(job) {
		// What the Job controller writes when activeDeadlineSeconds passes.
		msg := "Job was active longer than specified deadline"
		job.Status.Conditions = append(job.Status.Conditions,
			batchv1.JobCondition{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: msg, LastProbeTime: now, LastTransitionTime: now},
			batchv1.JobCondition{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonDeadlineExceeded, Message: msg, LastProbeTime: now, LastTransitionTime: now})
		if err := s.Client.Status().Update(ctx, job); err != nil {
			return fmt.Errorf("failing Job %s/%s: %w", job.Namespace, job.Name, err)
		}
		return nil
	}
	job.Status.CompletionTime = &now
	job.Status.Succeeded = 1
	job.Status.Conditions = append(job.Status.Conditions,
		batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now},
		batchv1.JobCondition{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastProbeTime: now, LastTransitionTime: now})
	if err := s.Client.Status().Update(ctx, job); err != nil {
		return fmt.Errorf("completing Job %s/%s: %w", job.Namespace, job.Name, err)
	}
	return nil
}

// stepsFor lists the plan steps of a resolved, unpacked bundle: its CRDs, then its CSV.
func (s *Sim) stepsFor(r resolution, res UnpackResult) []*v1alpha1.Step {
	replaces := ""
	if r.bundle.Replaces != "" && s.csvExists(context.Background(), r.sub.Namespace, r.bundle.Replaces) {
		replaces = r.bundle.Replaces // the installed CSV, not the bundle's declared value
	}
	ref, _ := json.Marshal(unpackedBundleReference{Kind: "ConfigMap", Name: res.Name, Namespace: res.ConfigMap.Namespace,
		CatalogSourceName: r.catalog.Name, CatalogSourceNamespace: r.catalog.Namespace, Replaces: replaces})
	step := func(group, version, kind, name string) *v1alpha1.Step {
		return &v1alpha1.Step{Resolving: r.bundle.CSVName, Status: "Unknown", Resource: v1alpha1.StepResource{
			CatalogSource: r.catalog.Name, CatalogSourceNamespace: r.catalog.Namespace,
			Group: group, Version: version, Kind: kind, Name: name, Manifest: string(ref)}}
	}
	var steps []*v1alpha1.Step
	for _, crd := range r.bundle.OwnedCRDs {
		steps = append(steps, step("apiextensions.k8s.io", "v1", "CustomResourceDefinition", crd.Name))
	}
	steps = append(steps, step(olm.Group, "v1alpha1", olm.ClusterServiceVersionKind, r.bundle.CSVName),
		step("", "v1", "ServiceAccount", deploymentName(r.bundle)))
	// The RBAC steps name what installCSV creates; they are listed for the plan's readers only.
	if len(r.bundle.ClusterPermissions) > 0 {
		name := permissionsName(r.bundle, r.sub.Namespace)
		steps = append(steps, step(rbacv1.GroupName, "v1", "ClusterRole", name), step(rbacv1.GroupName, "v1", "ClusterRoleBinding", name))
	}
	if r.bundle.BundledClusterRole != "" {
		steps = append(steps, step(rbacv1.GroupName, "v1", "ClusterRole", r.bundle.BundledClusterRole))
	}
	return steps
}

// WaitUnpacked runs the unpacker for a bundle until its Job completes (or fails), as OLM's
// requeues do, and returns the last result.
func (s *Sim) WaitUnpacked(ctx context.Context, cat *Catalog, b *Bundle, subNamespace string) (UnpackResult, error) {
	var res UnpackResult
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		var err error
		res, err = s.UnpackBundle(ctx, cat, b, subNamespace)
		if err != nil {
			return false, err
		}
		if res.Failed {
			return false, fmt.Errorf("unpack Job %s/%s failed", res.ConfigMap.Namespace, res.Name)
		}
		return res.Complete, nil
	})
	return res, err
}
