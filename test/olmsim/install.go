package olmsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

var csvGVK = v1alpha1.GroupVersion.WithKind(olm.ClusterServiceVersionKind)

// ExecutePlan is the catalog-operator's syncInstallPlans for one plan: an approved
// RequiresApproval plan moves to Installing; an Installing plan has its steps created (CRDs, the
// CSV and its RBAC, read back from the unpack ConfigMap) and becomes Complete, or Failed with
// InstallComponentFailed when a step cannot be created. The olm-operator then reacts (SyncCSVs).
func (s *Sim) ExecutePlan(ctx context.Context, ns, name string) error {
	ip := &v1alpha1.InstallPlan{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, ip); err != nil {
		return err
	}
	if !ip.Status.Populated() {
		return nil // the subscription sync owns the initial status
	}
	if ip.Status.Phase == v1alpha1.InstallPlanPhaseRequiresApproval {
		if !ip.Spec.Approved {
			return nil
		}
		ip.Status.Phase = v1alpha1.InstallPlanPhaseInstalling
		if err := s.Client.Status().Update(ctx, ip); err != nil {
			return err
		}
	}
	if ip.Status.Phase != v1alpha1.InstallPlanPhaseInstalling {
		return nil
	}
	now := s.now()
	ip.Status.StartTime = &now
	stepErr := s.executeSteps(ctx, ip)
	cond := v1alpha1.InstallPlanCondition{Type: v1alpha1.InstallPlanInstalled, Status: corev1.ConditionTrue, LastUpdateTime: &now, LastTransitionTime: &now}
	ip.Status.Phase = v1alpha1.InstallPlanPhaseComplete
	if stepErr != nil {
		cond.Status, cond.Reason, cond.Message = corev1.ConditionFalse, v1alpha1.InstallPlanReasonComponentFailed, stepErr.Error()
		ip.Status.Phase = v1alpha1.InstallPlanPhaseFailed
	}
	ip.Status.Conditions = []v1alpha1.InstallPlanCondition{cond}
	if err := s.Client.Status().Update(ctx, ip); err != nil {
		return err
	}
	if stepErr != nil {
		return nil
	}
	return s.SyncCSVs(ctx, ns)
}

func (s *Sim) executeSteps(ctx context.Context, ip *v1alpha1.InstallPlan) error {
	for _, st := range ip.Status.Plan {
		var ref unpackedBundleReference
		if err := json.Unmarshal([]byte(st.Resource.Manifest), &ref); err != nil {
			return fmt.Errorf("step %s: bad manifest reference: %w", st.Resource.Name, err)
		}
		// ExecutePlan re-reads the manifests from the unpack ConfigMap: it must still exist.
		cm := &corev1.ConfigMap{}
		if err := s.Client.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, cm); err != nil {
			return fmt.Errorf("error using catalogsource %s/%s: unpacked bundle %s: %w", ref.CatalogSourceNamespace, ref.CatalogSourceName, ref.Name, err)
		}
		cat := s.catalogs.get(types.NamespacedName{Namespace: ref.CatalogSourceNamespace, Name: ref.CatalogSourceName})
		if cat == nil || cat.bundle(st.Resolving) == nil {
			return fmt.Errorf("step %s: bundle %s not in catalog %s/%s", st.Resource.Name, st.Resolving, ref.CatalogSourceNamespace, ref.CatalogSourceName)
		}
		b := cat.bundle(st.Resolving)
		var err error
		status := "Created"
		switch st.Resource.Kind {
		case "CustomResourceDefinition":
			var existed bool
			existed, err = s.ensureCRD(ctx, b, st.Resource.Name, ip.Namespace, st.Resolving)
			if existed {
				status = "Present" // as OLM marks a CRD step whose CRD it updated
			}
		case olm.ClusterServiceVersionKind:
			err = s.installCSV(ctx, ip.Namespace, b, ref.Replaces)
		}
		if err != nil {
			return err
		}
		st.Status = status
	}
	return nil
}

// installedAlongsidePrefix starts the annotation OLM's catalog-operator writes on a CRD it creates
// or updates for a plan step, one per CSV: <namespace>/<CSV name> of the step's resolving CSV
// (OLM's catalog/step.go, package internal/alongside, v0.18 onwards).
const installedAlongsidePrefix = "operatorframework.io/installed-alongside-"

// installedAlongside is the annotation key and value for the CSV ns/csv: the key ends with the
// 64-bit FNV-1a hash of "<ns>/<csv>" in hex, as OLM names it.
func installedAlongside(ns, csv string) (string, string) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(ns + "/" + csv))
	return fmt.Sprintf("%s%x", installedAlongsidePrefix, h.Sum64()), ns + "/" + csv
}

// ensureCRD creates a CRD of the bundle, labelled olm.managed and annotated installed alongside the
// CSV ns/csv, as OLM's CRD step does; an existing CRD gets that annotation added (OLM updates the
// whole CRD, which the simulator skips). It reports whether the CRD existed.
func (s *Sim) ensureCRD(ctx context.Context, b *Bundle, name, ns, csv string) (bool, error) {
	key, value := installedAlongside(ns, csv)
	for _, d := range b.OwnedCRDs {
		if d.Name != name {
			continue
		}
		plural, group, _ := strings.Cut(d.Name, ".")
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: d.Name, Labels: map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
				Annotations: map[string]string{key: value}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group, Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Kind: d.Kind, ListKind: d.Kind + "List", Singular: strings.ToLower(d.Kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: d.Version, Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
			},
		}
		// OLM never deletes CRDs; an existing one is updated in place, which the simulator skips
		// but for OLM's annotation.
		err := s.Client.Create(ctx, crd)
		existed := apierrors.IsAlreadyExists(err)
		if existed {
			patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, key, value)
			err = s.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, patch))
		}
		if err != nil {
			return existed, fmt.Errorf("creating CRD %s: %w", d.Name, err)
		}
		return existed, waitCRDEstablished(ctx, s.Client, d.Name)
	}
	return false, fmt.Errorf("bundle %s does not own CRD %s", b.CSVName, name)
}

// deploymentName is the name of the bundle's operator Deployment and ServiceAccount.
func deploymentName(b *Bundle) string {
	if b.WebhookDeployment != "" {
		return b.WebhookDeployment
	}
	return b.Package + "-operator"
}

// installCSV creates the CSV and the objects the plan's steps create for it: its ServiceAccount,
// the ClusterRole and ClusterRoleBinding of its clusterPermissions, and bundled ClusterRoles.
func (s *Sim) installCSV(ctx context.Context, ns string, b *Bundle, replaces string) error {
	csv := &v1alpha1.ClusterServiceVersion{
		// The catalog-operator writes the bundle's properties on the CSV it creates.
		ObjectMeta: metav1.ObjectMeta{Name: b.CSVName, Namespace: ns,
			Labels:      map[string]string{olm.ManagedLabel: olm.ManagedLabelValue},
			Annotations: map[string]string{propertiesAnnotation: string(mustJSON(map[string]any{"properties": b.Properties()}))}},
		Spec: v1alpha1.ClusterServiceVersionSpec{
			DisplayName:               b.Package,
			Version:                   b.Version,
			Replaces:                  replaces,
			InstallStrategy:           v1alpha1.NamedInstallStrategy{StrategyName: "deployment", StrategySpec: rawJSON(map[string]any{"deployments": []any{map[string]any{"name": deploymentName(b), "spec": map[string]any{"selector": map[string]any{}, "template": map[string]any{}}}}})},
			CustomResourceDefinitions: v1alpha1.CustomResourceDefinitions{Owned: b.OwnedCRDs},
			Cleanup:                   v1alpha1.CleanupSpec{Enabled: b.CleanupEnabled},
		},
	}
	if b.WebhookDeployment != "" {
		csv.Spec.WebhookDefinitions = []v1alpha1.WebhookDescription{{GenerateName: "v" + b.Package + ".example.com", Type: "ValidatingAdmissionWebhook",
			DeploymentName: b.WebhookDeployment, ContainerPort: 443, SideEffects: "None", AdmissionReviewVersions: []string{"v1"}}}
	}
	if err := s.Client.Create(ctx, csv); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CSV %s/%s: %w", ns, b.CSVName, err)
		}
		if err := s.Client.Get(ctx, client.ObjectKeyFromObject(csv), csv); err != nil {
			return err
		}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: deploymentName(b), Namespace: ns}}
	if err := s.ensureOwnedByMerge(ctx, sa, csv); err != nil {
		return err
	}
	if len(b.ClusterPermissions) > 0 {
		name := permissionsName(b, ns)
		labels := ownerLabelsWithHash(csv, hashOf(b.ClusterPermissions))
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Rules: b.ClusterPermissions}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
		for _, o := range []client.Object{cr, crb} {
			if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	if b.BundledClusterRole != "" {
		// Bundle manifests get olm.managed and olm.owner, never the owner's kind or namespace (#2985).
		cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: b.BundledClusterRole,
			Labels: map[string]string{olm.ManagedLabel: olm.ManagedLabelValue, olm.OwnerLabel: b.CSVName}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
		err := s.Client.Create(ctx, cr)
		if apierrors.IsAlreadyExists(err) {
			patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, olm.OwnerLabel, b.CSVName)
			err = s.Client.Patch(ctx, cr, client.RawPatch(types.MergePatchType, patch))
		}
		if err != nil {
			return fmt.Errorf("bundled ClusterRole %s: %w", b.BundledClusterRole, err)
		}
	}
	return nil
}

// permissionsName is the name of the ClusterRole and ClusterRoleBinding of a bundle's
// clusterPermissions installed in ns: the CSV's name and a hash.
func permissionsName(b *Bundle, ns string) string {
	return b.CSVName + "-" + hashOf([]any{b.CSVName, ns, b.ClusterPermissions})
}

func ownerLabelsWithHash(csv *v1alpha1.ClusterServiceVersion, hash string) map[string]string {
	l := olm.OwnerLabels(csv.Name, csv.Namespace)
	l[olm.ManagedLabel] = olm.ManagedLabelValue
	l["olm.permissions.hash"] = hash
	return l
}

// ensureOwnedByMerge creates obj owned by csv, or merges csv into its owners (EnsureServiceAccount).
func (s *Sim) ensureOwnedByMerge(ctx context.Context, obj client.Object, csv *v1alpha1.ClusterServiceVersion) error {
	addNonBlockingOwner(obj, csv, csvGVK)
	obj.SetLabels(map[string]string{olm.ManagedLabel: olm.ManagedLabelValue})
	err := s.Client.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := s.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return err
	}
	addNonBlockingOwner(obj, csv, csvGVK)
	return s.Client.Update(ctx, obj)
}

// SyncCSVs is the olm-operator's pass over the CSVs of a namespace: its finalizer (v0.27+),
// OperatorGroup annotations, the deployment and webhook objects, copies into target namespaces,
// the Succeeded phase, replacement (Replacing, Deleting, delete), and finalizer processing of
// CSVs being deleted. Before v0.27 it also garbage-collects labelled cluster objects whose CSV is
// gone, but only for deletions it sees (edge-driven).
func (s *Sim) SyncCSVs(ctx context.Context, ns string) error {
	// A pass that lost a write race (409) is run again, as OLM's queue requeues it.
	return retry.OnError(retry.DefaultRetry, apierrors.IsConflict, func() error { return s.syncCSVs(ctx, ns) })
}

func (s *Sim) syncCSVs(ctx context.Context, ns string) error {
	list := &v1alpha1.ClusterServiceVersionList{}
	if err := s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		csv := &list.Items[i]
		switch {
		case csv.IsCopied():
			errs = append(errs, s.syncCopiedCSV(ctx, csv))
		case csv.DeletionTimestamp != nil: // processDeletions below
		default:
			errs = append(errs, s.syncCSV(ctx, csv))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.replaceCSVs(ctx, ns)
}

func (s *Sim) syncCSV(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) error {
	og, err := s.operatorGroup(ctx, csv.Namespace)
	if err != nil {
		return err
	}
	changed := false
	if s.Version.AtLeast(V0_27) && !hasString(csv.Finalizers, olm.CSVCleanupFinalizer) {
		csv.Finalizers = append(csv.Finalizers, olm.CSVCleanupFinalizer)
		changed = true
	}
	if og != nil {
		want := map[string]string{
			olm.OperatorGroupAnnotation:     og.Name,
			olm.OperatorNamespaceAnnotation: og.Namespace,
			olm.TargetNamespacesAnnotation:  strings.Join(og.Status.Namespaces, ","),
		}
		for k, v := range want {
			if csv.Annotations[k] != v {
				if csv.Annotations == nil {
					csv.Annotations = map[string]string{}
				}
				csv.Annotations[k] = v
				changed = true
			}
		}
	}
	if changed { // the olm-operator writes CSVs with a full Update
		if err := s.Client.Update(ctx, csv); err != nil {
			return fmt.Errorf("updating CSV %s/%s: %w", csv.Namespace, csv.Name, err)
		}
	}
	if err := s.ensureDeployment(ctx, csv); err != nil {
		return err
	}
	if err := s.ensureWebhooks(ctx, csv); err != nil {
		return err
	}
	targets, err := s.copyTargets(ctx, og)
	if err != nil {
		return err
	}
	for _, target := range targets {
		if target != csv.Namespace {
			if err := s.copyCSV(ctx, csv, target); err != nil {
				return err
			}
		}
	}
	if csv.Status.Phase == v1alpha1.CSVPhaseNone || csv.Status.Phase == v1alpha1.CSVPhasePending {
		return s.setCSVPhase(ctx, csv, v1alpha1.CSVPhaseSucceeded, v1alpha1.CSVReasonInstallSuccessful, "install strategy completed with no errors")
	}
	return nil
}

func (s *Sim) setCSVPhase(ctx context.Context, csv *v1alpha1.ClusterServiceVersion, phase v1alpha1.ClusterServiceVersionPhase, reason v1alpha1.ConditionReason, msg string) error {
	csv.Status.Phase, csv.Status.Reason, csv.Status.Message = phase, reason, msg
	if err := s.Client.Status().Update(ctx, csv); err != nil {
		return fmt.Errorf("CSV %s/%s to %s: %w", csv.Namespace, csv.Name, phase, err)
	}
	return nil
}

// ensureDeployment creates the operator Deployment, or takes it over on upgrade: a full Update
// leaves the new CSV its only owner, so the garbage collector keeps it when the old CSV goes.
func (s *Sim) ensureDeployment(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) error {
	var strategy struct {
		Deployments []struct {
			Name string `json:"name"`
		} `json:"deployments"`
	}
	_ = json.Unmarshal(csv.Spec.InstallStrategy.StrategySpec.Raw, &strategy)
	for _, d := range strategy.Deployments {
		labels := olm.OwnerLabels(csv.Name, csv.Namespace)
		labels[olm.ManagedLabel] = olm.ManagedLabelValue
		dep := &appsv1.Deployment{}
		err := s.Client.Get(ctx, types.NamespacedName{Namespace: csv.Namespace, Name: d.Name}, dep)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err == nil && dep.Labels[olm.OwnerLabel] == csv.Name {
			continue
		}
		sel := map[string]string{"app": d.Name}
		dep.ObjectMeta = metav1.ObjectMeta{Name: d.Name, Namespace: csv.Namespace, Labels: labels, ResourceVersion: dep.ResourceVersion,
			OwnerReferences: []metav1.OwnerReference{ownerRef(csv, csvGVK, false, false)}}
		dep.Spec = appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{
				ServiceAccountName: d.Name, NodeSelector: map[string]string{"kubernetes.io/os": "linux"},
				Containers: []corev1.Container{{Name: "manager", Image: "registry.example/" + d.Name + ":" + csv.Spec.Version}}}}}
		if dep.ResourceVersion == "" {
			err = s.Client.Create(ctx, dep)
		} else {
			err = s.Client.Update(ctx, dep)
		}
		if err != nil {
			return fmt.Errorf("deployment %s/%s: %w", csv.Namespace, d.Name, err)
		}
	}
	return nil
}

// ensureWebhooks creates, for each webhook definition, the Service, a ValidatingWebhookConfiguration
// with owner labels, the auth-delegator ClusterRoleBinding with owner labels, and the kube-system
// auth-reader RoleBinding that OLM never labels or deletes.
func (s *Sim) ensureWebhooks(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) error {
	for _, wh := range csv.Spec.WebhookDefinitions {
		svcName := olm.ServiceName(wh.DeploymentName)
		labels := olm.OwnerLabels(csv.Name, csv.Namespace)
		labels[olm.ManagedLabel] = olm.ManagedLabelValue
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName, Namespace: csv.Namespace},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}, Selector: map[string]string{"app": wh.DeploymentName}}}
		if err := s.ensureOwnedByMerge(ctx, svc, csv); err != nil {
			return err
		}
		existing := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		if err := s.Client.List(ctx, existing, client.MatchingLabels(olm.OwnerLabels(csv.Name, csv.Namespace))); err != nil {
			return err
		}
		if len(existing.Items) == 0 {
			whLabels := map[string]string{"olm.webhook-description-generate-name": wh.GenerateName}
			for k, v := range labels {
				whLabels[k] = v
			}
			vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{GenerateName: wh.GenerateName + "-", Labels: whLabels},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{
					Name: wh.GenerateName, AdmissionReviewVersions: wh.AdmissionReviewVersions,
					SideEffects:   ptr.To(admissionregistrationv1.SideEffectClassNone),
					FailurePolicy: ptr.To(admissionregistrationv1.Ignore),
					ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
						Namespace: csv.Namespace, Name: svcName, Port: ptr.To[int32](443)}},
					// Selects nothing: the simulated operator serves no webhook.
					ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"olmsim.olmguard.io/never": "true"}},
				}},
			}
			if err := s.Client.Create(ctx, vwc); err != nil {
				return fmt.Errorf("webhook configuration for %s: %w", csv.Name, err)
			}
		}
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: svcName + "-system:auth-delegator", Labels: labels},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: wh.DeploymentName, Namespace: csv.Namespace}}}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: olm.AuthReaderRoleBindingName(svcName), Namespace: "kube-system",
			Labels: map[string]string{olm.ManagedLabel: olm.ManagedLabelValue}},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "extension-apiserver-authentication-reader"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: wh.DeploymentName, Namespace: csv.Namespace}}}
		for _, o := range []client.Object{crb, rb} {
			err := s.Client.Create(ctx, o)
			if apierrors.IsAlreadyExists(err) && o == crb {
				// Relabelled to the current CSV (server-side apply with force in OLM).
				err = s.Client.Patch(ctx, crb, client.RawPatch(types.MergePatchType, mustJSON(map[string]any{"metadata": map[string]any{"labels": labels}})))
			}
			if err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
		}
	}
	return nil
}

// copyTargets lists the namespaces a CSV is copied into: the group's targets, or every active
// namespace for an AllNamespaces group unless copied CSVs are disabled (OLMConfig).
func (s *Sim) copyTargets(ctx context.Context, og *olmv1.OperatorGroup) ([]string, error) {
	if og == nil {
		return nil, nil
	}
	if !og.Status.AllNamespaces() {
		return og.Status.Namespaces, nil
	}
	if s.DisableCopiedCSVs {
		return nil, nil
	}
	list := &corev1.NamespaceList{}
	if err := s.Client.List(ctx, list); err != nil {
		return nil, err
	}
	var out []string
	for _, ns := range list.Items {
		if ns.Status.Phase != corev1.NamespaceTerminating && ns.DeletionTimestamp == nil {
			out = append(out, ns.Name)
		}
	}
	return out, nil
}

// copyCSV writes the copy of a CSV into a target namespace (operatorgroup.go copyToNamespace).
func (s *Sim) copyCSV(ctx context.Context, src *v1alpha1.ClusterServiceVersion, target string) error {
	cp := &v1alpha1.ClusterServiceVersion{ObjectMeta: metav1.ObjectMeta{Name: src.Name, Namespace: target,
		Labels: map[string]string{}, Annotations: map[string]string{}}, Spec: src.Spec}
	for k, v := range src.Labels {
		if !strings.HasPrefix(k, olm.ComponentLabelPrefix) {
			cp.Labels[k] = v
		}
	}
	cp.Labels[olm.CopiedFromLabel] = src.Namespace
	for k, v := range src.Annotations {
		if k != olm.TargetNamespacesAnnotation {
			cp.Annotations[k] = v
		}
	}
	err := s.Client.Create(ctx, cp)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("copying CSV %s to %s: %w", src.Name, target, err)
	}
	return s.setCSVPhase(ctx, cp, src.Status.Phase, v1alpha1.CSVReasonCopied,
		"The operator is running in "+src.Namespace+" but is managing this namespace")
}

// syncCopiedCSV deletes a copy whose original is gone.
func (s *Sim) syncCopiedCSV(ctx context.Context, cp *v1alpha1.ClusterServiceVersion) error {
	if s.csvExists(ctx, cp.Labels[olm.CopiedFromLabel], cp.Name) {
		return nil
	}
	return client.IgnoreNotFound(s.Client.Delete(ctx, cp))
}

// replaceCSVs moves a replaced CSV to Replacing, then, once its replacement Succeeded, to
// Deleting, and deletes it: every upgrade deletes the old CSV object.
func (s *Sim) replaceCSVs(ctx context.Context, ns string) error {
	list := &v1alpha1.ClusterServiceVersionList{}
	if err := s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		newer := &list.Items[i]
		if newer.IsCopied() || newer.Spec.Replaces == "" {
			continue
		}
		for j := range list.Items {
			old := &list.Items[j]
			if old.Name != newer.Spec.Replaces || old.IsCopied() || old.DeletionTimestamp != nil {
				continue
			}
			if old.Status.Phase != v1alpha1.CSVPhaseReplacing && old.Status.Phase != v1alpha1.CSVPhaseDeleting {
				if err := s.setCSVPhase(ctx, old, v1alpha1.CSVPhaseReplacing, v1alpha1.CSVReasonBeingReplaced, "being replaced by csv: "+newer.Name); err != nil {
					return err
				}
			}
			if newer.Status.Phase != v1alpha1.CSVPhaseSucceeded {
				continue
			}
			if err := s.setCSVPhase(ctx, old, v1alpha1.CSVPhaseDeleting, v1alpha1.CSVReasonReplaced,
				"has been replaced by a newer ClusterServiceVersion that has successfully installed."); err != nil {
				return err
			}
			if err := s.Client.Delete(ctx, old); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return s.processDeletions(ctx, ns)
}

// processDeletions runs OLM's finalizer on CSVs being deleted (v0.27+), or before v0.27 the
// edge-driven GC of labelled cluster objects whose CSV is gone.
func (s *Sim) processDeletions(ctx context.Context, ns string) error {
	list := &v1alpha1.ClusterServiceVersionList{}
	if err := s.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	for i := range list.Items {
		if csv := &list.Items[i]; csv.DeletionTimestamp != nil && !csv.IsCopied() {
			if err := s.ProcessCSVFinalizer(ctx, csv); err != nil {
				return err
			}
		}
	}
	return nil
}

// ProcessCSVFinalizer is OLM's csv-cleanup finalizer (v0.27+): delete the ClusterRoles,
// ClusterRoleBindings and webhook configurations carrying all three owner labels of the CSV,
// then remove the finalizer with a full Update. Nothing else is deleted.
func (s *Sim) ProcessCSVFinalizer(ctx context.Context, csv *v1alpha1.ClusterServiceVersion) error {
	if !hasString(csv.Finalizers, olm.CSVCleanupFinalizer) {
		return nil
	}
	if err := s.deleteOwnerLabelled(ctx, csv.Name, csv.Namespace); err != nil {
		return err
	}
	csv.Finalizers = removeString(csv.Finalizers, olm.CSVCleanupFinalizer)
	return client.IgnoreNotFound(s.Client.Update(ctx, csv))
}

// GCOwnerLabelled is the pre-v0.27 edge-driven cleanup: when OLM sees a CSV deleted, it deletes
// the labelled cluster objects of that CSV. If OLM was not running at that moment, nothing does.
func (s *Sim) GCOwnerLabelled(ctx context.Context, csvName, csvNamespace string) error {
	if s.csvExists(ctx, csvNamespace, csvName) {
		return nil
	}
	return s.deleteOwnerLabelled(ctx, csvName, csvNamespace)
}

func (s *Sim) deleteOwnerLabelled(ctx context.Context, name, ns string) error {
	sel := client.MatchingLabels(olm.OwnerLabels(name, ns))
	for _, o := range []client.Object{&rbacv1.ClusterRoleBinding{}, &rbacv1.ClusterRole{},
		&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		if err := s.Client.DeleteAllOf(ctx, o, sel); err != nil {
			return fmt.Errorf("deleting %T of CSV %s/%s: %w", o, ns, name, err)
		}
	}
	return nil
}

func hasString(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func removeString(list []string, v string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}
