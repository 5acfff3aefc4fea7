package olmsim

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// Bundle is one operator version in a simulated catalog.
type Bundle struct {
	Package  string
	Channel  string
	CSVName  string
	Version  string
	Replaces string
	// Image is the bundle image path; OLM names the unpack Job and ConfigMap after its hash.
	Image string
	// OwnedCRDs become CRDs created by the plan and spec.customresourcedefinitions.owned.
	OwnedCRDs []v1alpha1.CRDDescription
	// ClusterPermissions become a ClusterRole and ClusterRoleBinding with OLM's three owner labels.
	ClusterPermissions []rbacv1.PolicyRule
	// BundledClusterRole is a ClusterRole shipped as a bundle manifest: OLM labels it olm.managed
	// and olm.owner=<csv> but not olm.owner.kind or olm.owner.namespace, so its own cleanup, which
	// matches all three, never finds it (OLM issue #2985; labels as OLM v0.46.0 writes them,
	// test/realolm/tier's conformance test).
	BundledClusterRole string
	// CleanupEnabled sets the CSV's spec.cleanup.enabled (OLM's own opt-in for operand deletion).
	CleanupEnabled bool
	// WebhookDeployment, when set, gives the CSV a validating webhook served by that deployment:
	// a ValidatingWebhookConfiguration with owner labels and a kube-system auth-reader RoleBinding.
	WebhookDeployment string
}

// propertiesAnnotation carries a bundle's properties on the CSV OLM creates from it.
const propertiesAnnotation = "operatorframework.io/properties"

// Properties are the bundle's olm.package and olm.gvk properties, as a catalog serves them (and
// test/realolm writes them into the file-based catalog it serves to OLM).
func (b *Bundle) Properties() []map[string]any {
	props := []map[string]any{{"type": "olm.package", "value": map[string]string{"packageName": b.Package, "version": b.Version}}}
	for _, crd := range b.OwnedCRDs {
		_, group, _ := strings.Cut(crd.Name, ".")
		props = append(props, map[string]any{"type": "olm.gvk", "value": map[string]string{"group": group, "kind": crd.Kind, "version": crd.Version}})
	}
	return props
}

// metadataAnnotations are the bundle's metadata/annotations.yaml, which opm copies onto the
// unpack ConfigMap.
func (b *Bundle) metadataAnnotations() map[string]string {
	const prefix = "operators.operatorframework.io.bundle."
	return map[string]string{
		prefix + "mediatype.v1": "registry+v1", prefix + "manifests.v1": "manifests/", prefix + "metadata.v1": "metadata/",
		prefix + "package.v1": b.Package, prefix + "channels.v1": b.Channel, prefix + "channel.default.v1": b.Channel,
	}
}

// Catalog is a simulated CatalogSource and the bundles it serves.
type Catalog struct {
	Name      string
	Namespace string
	// Image is the catalog image the registry pod runs.
	Image string
	// Polling turns on spec.updateStrategy.registryPoll (OLM then runs EnsureRegistryServer on
	// every sync).
	Polling bool
	Bundles []Bundle
}

func (c *Catalog) key() types.NamespacedName {
	return types.NamespacedName{Namespace: c.Namespace, Name: c.Name}
}

// bundle returns the bundle with the given CSV name.
func (c *Catalog) bundle(csv string) *Bundle {
	for i := range c.Bundles {
		if c.Bundles[i].CSVName == csv {
			return &c.Bundles[i]
		}
	}
	return nil
}

// head returns the newest bundle of a package channel: the one no other bundle replaces.
func (c *Catalog) head(pkg, channel string) *Bundle {
	var head *Bundle
	for i := range c.Bundles {
		b := &c.Bundles[i]
		if b.Package != pkg || (channel != "" && b.Channel != channel) {
			continue
		}
		replaced := false
		for _, o := range c.Bundles {
			replaced = replaced || (o.Package == pkg && o.Replaces == b.CSVName)
		}
		if !replaced {
			head = b
		}
	}
	return head
}

// next returns the bundle that replaces the installed CSV, if any.
func (c *Catalog) next(pkg, installed string) *Bundle {
	for i := range c.Bundles {
		if b := &c.Bundles[i]; b.Package == pkg && b.Replaces == installed {
			return b
		}
	}
	return nil
}

type catalogs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*Catalog
}

func (c *catalogs) put(cat *Catalog) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]*Catalog{}
	}
	c.m[cat.key()] = cat
}

func (c *catalogs) get(k types.NamespacedName) *Catalog {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

func (c *catalogs) all() []*Catalog {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*Catalog, 0, len(c.m))
	for _, v := range c.m {
		out = append(out, v)
	}
	return out
}

// AddCatalog creates the CatalogSource, as a user would, and lets the catalog-operator serve it.
func (s *Sim) AddCatalog(ctx context.Context, cat *Catalog) error {
	if cat.Namespace == "" {
		cat.Namespace = s.CatalogNamespace
	}
	if cat.Image == "" {
		cat.Image = "registry.example/catalogs/" + cat.Name + ":latest"
	}
	s.catalogs.put(cat)
	cs := &v1alpha1.CatalogSource{
		ObjectMeta: metav1.ObjectMeta{Name: cat.Name, Namespace: cat.Namespace},
		Spec:       v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: cat.Image, DisplayName: cat.Name, Publisher: "olmsim"},
	}
	if err := s.Admin.Create(ctx, cs); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating CatalogSource %s: %w", cat.key(), err)
	}
	return s.SyncCatalogSource(ctx, cat.Namespace, cat.Name)
}

// catalogPodSpec is the desired spec of a catalog's registry pod.
func catalogPodSpec(cs *v1alpha1.CatalogSource) corev1.PodSpec {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: olm.CatalogServerPort}}, PeriodSeconds: 10}
	return corev1.PodSpec{
		ServiceAccountName: cs.Name,
		NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
		Containers: []corev1.Container{{
			Name:  "registry-server",
			Image: cs.Spec.Image,
			Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: olm.CatalogServerPort}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("50Mi")}},
			ReadinessProbe: probe,
			LivenessProbe:  probe,
			StartupProbe:   &corev1.Probe{ProbeHandler: probe.ProbeHandler, FailureThreshold: 15, PeriodSeconds: 10},
		}},
	}
}

// hashOf stands in for OLM's hashutil.DeepHashObject: a stable hash of the desired object.
func hashOf(v any) string {
	data, _ := json.Marshal(v)
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%x", sum)[:16]
}

func (s *Sim) catalogPod(cs *v1alpha1.CatalogSource) *corev1.Pod {
	spec := catalogPodSpec(cs)
	annotations := map[string]string{"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
	for k, v := range cs.Annotations {
		annotations[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: cs.Name + "-",
			Namespace:    cs.Namespace,
			Labels: map[string]string{
				olm.CatalogSourceLabel: cs.Name,
				olm.ManagedLabel:       olm.ManagedLabelValue,
				olm.PodSpecHashLabel:   hashOf(spec),
			},
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cs, v1alpha1.GroupVersion.WithKind(olm.CatalogSourceKind), true, false)},
		},
		Spec: spec,
	}
}

// isPodDead is OLM's dead-pod test for its version (#3208: fixed in v0.28/v0.29, widened in v0.31 and v0.32).
func (s *Sim) isPodDead(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.DisruptionTarget || c.Status != corev1.ConditionTrue {
			continue
		}
		if s.Version.AtLeast(V0_32) {
			return true
		}
		if p.DeletionTimestamp != nil && (c.Reason == "DeletionByTaintManager" || (s.Version.Minor >= 31 && c.Reason == "TerminationByKubelet")) {
			return true
		}
	}
	return false
}

// SyncCatalogSource is one pass of the catalog-operator over a CatalogSource: its ServiceAccount
// and Service, then CheckRegistryServer and, when unhealthy, EnsureRegistryServer.
func (s *Sim) SyncCatalogSource(ctx context.Context, namespace, name string) error {
	cs := &v1alpha1.CatalogSource{}
	if err := s.Client.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, cs); err != nil {
		return client.IgnoreNotFound(err)
	}
	gvk := v1alpha1.GroupVersion.WithKind(olm.CatalogSourceKind)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: cs.Name, Namespace: cs.Namespace,
		OwnerReferences: []metav1.OwnerReference{ownerRef(cs, gvk, true, true)}}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(cs.Name, ".", "-"), Namespace: cs.Namespace,
			OwnerReferences: []metav1.OwnerReference{ownerRef(cs, gvk, false, false)}},
		Spec: corev1.ServiceSpec{
			Ports:    []corev1.ServicePort{{Name: "grpc", Port: olm.CatalogServerPort, TargetPort: intstr.FromInt32(olm.CatalogServerPort)}},
			Selector: map[string]string{olm.CatalogSourceLabel: cs.Name, olm.ManagedLabel: olm.ManagedLabelValue},
		},
	}
	for _, o := range []client.Object{sa, svc} {
		if err := s.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}

	pods := &corev1.PodList{}
	if err := s.Client.List(ctx, pods, client.InNamespace(cs.Namespace),
		client.MatchingLabels{olm.CatalogSourceLabel: cs.Name, olm.ManagedLabel: olm.ManagedLabelValue}); err != nil {
		return err
	}
	desired := s.catalogPod(cs)
	var correct, live []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != cs.Spec.Image ||
			p.Labels[olm.PodSpecHashLabel] != desired.Labels[olm.PodSpecHashLabel] {
			continue
		}
		correct = append(correct, p)
		if s.Version.AtLeast(V0_29) && s.isPodDead(p) {
			// detectAndDeleteDeadPods (v0.29+, OLM PR #3366).
			if err := s.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
				return err
			}
			continue
		}
		live = append(live, p)
	}
	// Before v0.29 a Terminating pod with the right labels and hash still counts as healthy (#3208).
	healthy := len(live) > 0
	if s.Version.AtLeast(V0_28) && !s.Version.AtLeast(V0_29) && healthy && s.catalog(cs).Polling {
		// v0.28: ensurePod force-deletes taint-manager victims, but only runs for polling catalogs.
		live = nil
		for _, p := range correct {
			if s.isPodDead(p) {
				if err := s.Client.Delete(ctx, p, client.GracePeriodSeconds(0)); client.IgnoreNotFound(err) != nil {
					return err
				}
				continue
			}
			live = append(live, p)
		}
		healthy = len(live) > 0
	}
	if !healthy {
		// EnsureRegistryServer: no correct pod, so delete whatever is left and create a new one.
		for i := range pods.Items {
			if err := s.Client.Delete(ctx, &pods.Items[i], client.GracePeriodSeconds(1)); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
		if err := s.Client.Create(ctx, desired); err != nil {
			return fmt.Errorf("creating catalog pod for %s/%s: %w", cs.Namespace, cs.Name, err)
		}
		live = []*corev1.Pod{desired}
	}
	return s.writeCatalogStatus(ctx, cs, svc, live)
}

func (s *Sim) catalog(cs *v1alpha1.CatalogSource) *Catalog {
	if c := s.catalogs.get(types.NamespacedName{Namespace: cs.Namespace, Name: cs.Name}); c != nil {
		return c
	}
	return &Catalog{Name: cs.Name, Namespace: cs.Namespace}
}

func (s *Sim) writeCatalogStatus(ctx context.Context, cs *v1alpha1.CatalogSource, svc *corev1.Service, live []*corev1.Pod) error {
	state := "TRANSIENT_FAILURE"
	for _, p := range live {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			state = "READY"
		}
	}
	now := s.now()
	want := cs.DeepCopy()
	if want.Status.RegistryService == nil {
		want.Status.RegistryService = &v1alpha1.RegistryServiceStatus{Protocol: "grpc", ServiceName: svc.Name,
			ServiceNamespace: cs.Namespace, Port: fmt.Sprint(olm.CatalogServerPort), CreatedAt: &now}
	}
	if want.Status.ConnectionState == nil || want.Status.ConnectionState.LastObservedState != state {
		want.Status.ConnectionState = &v1alpha1.GRPCConnectionState{
			Address:           fmt.Sprintf("%s.%s.svc:%d", svc.Name, cs.Namespace, olm.CatalogServerPort),
			LastObservedState: state, LastConnectTime: &now}
	}
	if equalJSON(want.Status, cs.Status) {
		return nil
	}
	return s.Client.Status().Update(ctx, want)
}

// RunCatalogOperator keeps every catalog added with AddCatalog served, as the catalog-operator's
// pod informer does: any change to a catalog pod, and a resync every interval (default 5s),
// triggers a sync. It returns when ctx is done.
func (s *Sim) RunCatalogOperator(ctx context.Context, resync time.Duration) {
	s.runLoop(ctx, resync, &corev1.PodList{}, client.HasLabels{olm.CatalogSourceLabel}, func(ctx context.Context) {
		for _, cat := range s.catalogs.all() {
			_ = s.SyncCatalogSource(ctx, cat.Namespace, cat.Name)
		}
	})
}
