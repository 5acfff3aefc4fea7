package hostile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

// RecoveredLabel marks a pod the test expects olmguard to delete (item 6's positive control).
const RecoveredLabel = "hostile.olmguard.io/recovered-by-olmguard"

// record is what the snapshot keeps of one object: no status, resourceVersion or managedFields.
type record struct {
	UID         string
	Labels      map[string]string
	Annotations map[string]string
	Owners      []string
	Finalizers  []string
	Hash        string // of spec, rules, data and the other content fields
}

// key names an object: resource, namespace, name.
type key struct {
	GVR       schema.GroupVersionResource
	Namespace string
	Name      string
}

func (k key) String() string {
	r := k.GVR.Resource
	if k.GVR.Group != "" {
		r += "." + k.GVR.Group
	}
	if k.Namespace == "" {
		return r + "/" + k.Name
	}
	return r + " " + k.Namespace + "/" + k.Name
}

type snapshot map[key]record

// skipped resources: written all the time by the cluster's own machinery.
var skipped = map[string]bool{"events": true, "leases": true, "endpointslices": true, "endpoints": true,
	"componentstatuses": true, "packagemanifests": true}

// volatile annotations: rewritten by controllers on their own schedule.
// operatorframework.io/installed-alongside-<hash> is OLM's record, on the CRDs and APIServices it
// applies, of the CSVs installed with them: a tenant installing a package another namespace runs
// adds one (item 2), OLM's write.
var volatile = []string{"deployment.kubernetes.io/", "control-plane.alpha.kubernetes.io/leader",
	"node.alpha.kubernetes.io/ttl", "kubectl.kubernetes.io/last-applied-configuration", "olmguard.io/resync",
	"operatorframework.io/installed-alongside-"}

// contentFields are hashed: what an object says, as opposed to what is observed of it.
var contentFields = []string{"spec", "rules", "data", "binaryData", "stringData", "webhooks", "roleRef", "subjects",
	"aggregationRule", "type", "secrets"}

// takeSnapshot lists every object of every listable resource (via discovery) outside the tenants'
// namespaces (and but their Namespace objects, which OLM labels for their OperatorGroups).
// The tenants' namespaces are left out on the server (a field selector) too: item 4 puts 200 MB of
// Subscriptions in one.
func takeSnapshot(ctx context.Context, c *cluster.Cluster, tenants []string) (snapshot, error) {
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 200, 400
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var sel []string
	for _, ns := range tenants {
		sel = append(sel, "metadata.namespace!="+ns)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return nil, err
	}
	out := snapshot{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || skipped[r.Name] || !slices.Contains(r.Verbs, "list") {
				continue
			}
			gvr := gv.WithResource(r.Name)
			opts := metav1.ListOptions{}
			if r.Namespaced {
				opts.FieldSelector = strings.Join(sel, ",")
			}
			items, err := dyn.Resource(gvr).List(ctx, opts)
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue // a CRD deleted meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("listing %s: %w", gvr, err)
			}
			for i := range items.Items {
				o := &items.Items[i]
				if isTenantNamespace(o.GetNamespace()) || (r.Name == "namespaces" && gv.Group == "" && isTenantNamespace(o.GetName())) {
					continue
				}
				out[key{gvr, o.GetNamespace(), o.GetName()}] = recordOf(o)
			}
		}
	}
	return out, nil
}

// volatileLabels: OLM's Operator controller adds and removes its component labels
// (operators.coreos.com/<package>.<namespace>) on its own schedule, long after an install.
var volatileLabels = []string{"operators.coreos.com/"}

func recordOf(o *unstructured.Unstructured) record {
	r := record{UID: string(o.GetUID()), Finalizers: o.GetFinalizers()}
	for k, v := range o.GetLabels() {
		if slices.ContainsFunc(volatileLabels, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		if r.Labels == nil {
			r.Labels = map[string]string{}
		}
		r.Labels[k] = v
	}
	for k, v := range o.GetAnnotations() {
		if slices.ContainsFunc(volatile, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		if r.Annotations == nil {
			r.Annotations = map[string]string{}
		}
		r.Annotations[k] = v
	}
	for _, ref := range o.GetOwnerReferences() {
		r.Owners = append(r.Owners, fmt.Sprintf("%s/%s %s %s", ref.APIVersion, ref.Kind, ref.Name, ref.UID))
	}
	content := map[string]any{}
	for _, f := range contentFields {
		if v, ok := o.Object[f]; ok {
			content[f] = v
		}
	}
	// The aggregation controller computes an aggregated ClusterRole's rules (OLM's provided-API
	// roles of a tenant's install join edit and view): its aggregationRule is what is declared.
	if _, ok := o.Object["aggregationRule"]; ok {
		delete(content, "rules")
	}
	b, _ := json.Marshal(content)
	sum := sha256.Sum256(b)
	r.Hash = hex.EncodeToString(sum[:8])
	return r
}

// allowFunc reports whether the change of k from before to after (after nil: deleted) is one the
// test expects, with the reason.
type allowFunc func(k key, before record, after *record) (string, bool)

// allowedEverywhere are the changes any attack may see, each made by the cluster's or OLM's own
// machinery, never by olmguard on a tenant's behalf:
//   - Nodes: the node lifecycle controller taints a NotReady node, kwok rewrites node annotations
//     (item 6 fails one node).
//   - Objects OLM labels for a tenant namespace's CSV (olm.owner.namespace=tenant-a-...), and
//     changes of OLM's ownership labels alone (olm.owner, olm.owner.namespace, olm.owner.kind): OLM
//     relabels a bundled ClusterRole for the newest CSV of its package (item 2; on v0.46.0 with
//     olm.owner only), which is OLM's write, not a deletion.
//   - OLM's cluster objects for a tenant's CSV (labelled olm.owner.namespace=tenant-a-...) go
//     with that CSV, and so does its Operator object (<package>.<tenant namespace>).
//   - In OLM's namespace, finished unpack Jobs and their pods go after their TTL (OLM v0.43+ sets
//     300 s; olmguard's --unpack-job-default-ttl 10 min), and the unpack Jobs and ConfigMaps of another
//     attack's install (begun before this attack's snapshot) are written on: OLM's own unpack.
//   - A pod labelled RecoveredLabel: item 6's positive control, which olmguard must delete.
func allowedEverywhere(k key, before record, after *record) (string, bool) {
	switch {
	case k.GVR.Resource == "nodes" && after != nil:
		return "node status machinery", true
	case after != nil && onlyOwnershipLabels(before, *after):
		return "OLM relabels its object for the newest CSV of a package", true
	case after != nil && isTenantNamespace(after.Labels[olm.OwnerNamespaceLabel]):
		return "OLM's labels for a tenant's CSV", true
	case after == nil && isTenantNamespace(before.Labels[olm.OwnerNamespaceLabel]):
		return "OLM's object for a tenant's CSV, removed with it", true
	case k.GVR.Resource == "operators" && k.GVR.Group == "operators.coreos.com" && isTenantNamespace(k.Name[strings.LastIndex(k.Name, ".")+1:]):
		return "OLM's Operator object of a tenant's install", true
	case k.Namespace == cluster.OLMNamespace && after == nil && (k.GVR.Resource == "jobs" || k.GVR.Resource == "pods"):
		return "unpack Job TTL", true
	case k.Namespace == cluster.OLMNamespace && after != nil && (k.GVR.Resource == "jobs" || k.GVR.Resource == "configmaps"):
		return "a bundle unpack of a tenant's install in progress", true
	case k.GVR.Resource == "pods" && before.Labels[RecoveredLabel] == "true" && after == nil:
		return "item 6's positive control", true
	}
	return "", false
}

// diff returns every object of before deleted, replaced or changed in after that no allow excuses.
func diff(before, after snapshot, allow ...allowFunc) []string {
	var out []string
	for _, k := range slices.SortedFunc(maps.Keys(before), func(a, b key) int { return strings.Compare(a.String(), b.String()) }) {
		b := before[k]
		a, ok := after[k]
		var ap *record
		if ok {
			ap = &a
		}
		what := ""
		switch {
		case !ok:
			what = "deleted"
		case a.UID != b.UID:
			what = "replaced (new UID)"
		default:
			what = changes(b, a)
		}
		if what == "" {
			continue
		}
		excused := false
		for _, f := range append([]allowFunc{allowedEverywhere}, allow...) {
			if _, ok := f(k, b, ap); ok {
				excused = true
				break
			}
		}
		if !excused {
			out = append(out, k.String()+": "+what)
		}
	}
	return out
}

func changes(b, a record) string {
	var out []string
	if !maps.Equal(b.Labels, a.Labels) {
		out = append(out, fmt.Sprintf("labels %v -> %v", b.Labels, a.Labels))
	}
	if !maps.Equal(b.Annotations, a.Annotations) {
		out = append(out, fmt.Sprintf("annotations %v -> %v", sortedKeys(b.Annotations), sortedKeys(a.Annotations)))
	}
	if !slices.Equal(b.Owners, a.Owners) {
		out = append(out, fmt.Sprintf("ownerReferences %v -> %v", b.Owners, a.Owners))
	}
	if !slices.Equal(b.Finalizers, a.Finalizers) {
		out = append(out, fmt.Sprintf("finalizers %v -> %v", b.Finalizers, a.Finalizers))
	}
	if b.Hash != a.Hash {
		out = append(out, "content (spec/rules/data/webhooks) changed")
	}
	return strings.Join(out, "; ")
}

func sortedKeys(m map[string]string) []string {
	ks := slices.Collect(maps.Keys(m))
	sort.Strings(ks)
	return ks
}

// settledSnapshot waits until two snapshots in a row are equal (OLM and the controllers have
// finished their writes) and returns the last.
func (e *env) settledSnapshot(t *testing.T) snapshot {
	t.Helper()
	var last snapshot
	testenv.Eventually(t, "the cluster outside the tenants' namespaces settles", func(ctx context.Context) (bool, error) {
		s, err := takeSnapshot(ctx, e.c, e.tenantNamespaces())
		if err != nil {
			return false, err
		}
		same := last != nil && len(diff(last, s)) == 0 && len(diff(s, last)) == 0
		last = s
		return same, nil
	})
	return last
}

// checkUnchanged waits until nothing outside the tenants' namespaces differs from before but
// what allow excuses; it fails with the differences left after testenv.Patience. Deletions never
// come back, so a failing check takes the whole patience: the passing one does not.
func (e *env) checkUnchanged(t *testing.T, before snapshot, allow ...allowFunc) {
	t.Helper()
	var left []string
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		after, err := takeSnapshot(ctx, e.c, e.tenantNamespaces())
		if err != nil {
			return false, err
		}
		left = diff(before, after, allow...)
		// Deletions are final: report them at once instead of waiting.
		for _, l := range left {
			if strings.HasSuffix(l, ": deleted") {
				return true, nil
			}
		}
		return len(left) == 0, nil
	})
	if err != nil && len(left) == 0 {
		t.Fatalf("snapshot: %v", err)
	}
	for _, l := range left {
		t.Errorf("outside the tenants' namespaces: %s", l)
	}
}

// snapshot is the state an attack starts from. The attacks run side by side: it does not wait for
// the cluster to settle (the others' installs go on), TestHostileTenant did before any started.
func (e *env) snapshot(t *testing.T) snapshot {
	t.Helper()
	s, err := takeSnapshot(context.Background(), e.c, e.tenantNamespaces())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ownershipLabels are OLM's labels naming the CSV an object belongs to.
var ownershipLabels = []string{olm.OwnerLabel, olm.OwnerNamespaceLabel, "olm.owner.kind"}

// onlyOwnershipLabels reports whether a and b differ in OLM's ownership labels and nothing else.
func onlyOwnershipLabels(b, a record) bool {
	strip := func(r record) record {
		r.Labels = maps.Clone(r.Labels)
		for _, l := range ownershipLabels {
			delete(r.Labels, l)
		}
		if len(r.Labels) == 0 {
			r.Labels = nil
		}
		return r
	}
	return changes(strip(b), strip(a)) == "" && b.UID == a.UID
}
