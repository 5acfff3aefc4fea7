package doctor

import (
	"context"
	"fmt"
	"io"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/internal/cacheneeds"
	"github.com/olmguard/olmguard/internal/kubectlcmd"
	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/unpack"
)

// Options configure an audit.
type Options struct {
	// Namespace limits the audit to one namespace; "" audits all of them. Nodes are always read.
	Namespace string
	// StuckAfter is how long a CSV or catalog pod may be terminating before it counts as stuck.
	StuckAfter time.Duration
	// PendingAfter is how long a CSV may stay Pending or Installing, and a catalog not READY,
	// before it is reported.
	PendingAfter time.Duration
	// Recheck is how long to wait before reading Subscriptions in drift again: only a drift that
	// is still there, unchanged, is reported (OLM may just be a moment behind). 0 reports at once.
	Recheck time.Duration
	// PageSize is the List page size; progress is printed for lists longer than one page.
	PageSize int64
	// CSVPageSize is the page size for CSVs (0: PageSize). A CSV is the largest object OLM
	// stores (install strategy, CRD descriptions, an icon of up to a few hundred KiB) and a page
	// is decoded whole before its spec is dropped, so a long-running reader keeps it small.
	CSVPageSize int64
	// SubscriptionPageSize is the page size for Subscriptions (0: PageSize). A tenant who may
	// create Subscriptions decides their size (a spec.config of a megabyte), and a page is read
	// whole before it is decoded, so a long-running reader keeps it small.
	SubscriptionPageSize int64
	// SkipCopiedCSVs leaves out the copies OLM makes of a CSV in every target namespace (label
	// olm.copiedFrom) when listing: no check reports a copy, and on clusters with many namespaces
	// they are most of the CSVs. The controller's periodic audit sets it.
	SkipCopiedCSVs bool
	// CopiedCSVsAbove is how many of OLM's copied CSVs pass without a finding
	// (CheckCopiedCSVs); 0 leaves the check out. It runs on a whole-cluster audit only, and
	// counts the copies from the originals and the namespaces, without reading a copy.
	CopiedCSVsAbove int
	// Shared, when set, gives the Subscriptions and InstallPlans to check instead of listing
	// them: objects the audit reads and never writes, shared with whoever holds them (the
	// controller's cache). An audit checks all of them at once, 20,000 of each on a cluster of
	// 2,000 namespaces: as listed copies, 19 MB more at the controller's peak.
	Shared SharedObjects
	// Progress receives progress lines (nil: none).
	Progress io.Writer
	Now      func() time.Time
}

// SharedObjects gives an audit the Subscriptions and InstallPlans of a namespace ("": all), to be
// read and never written.
type SharedObjects interface {
	Subscriptions(ctx context.Context, namespace string) ([]*v1alpha1.Subscription, error)
	InstallPlans(ctx context.Context, namespace string) ([]*v1alpha1.InstallPlan, error)
}

// DefaultOptions returns the defaults of `kubectl olmguard doctor`.
func DefaultOptions() Options {
	// CSVs and Subscriptions 100 to a page: a page of 40 KB CSVs (a usual alm-examples) is 4 MB,
	// and of a tenant's 1 MiB Subscriptions 100 MB (docs/performance.md, "A cluster of 2,000
	// namespaces").
	return Options{StuckAfter: 5 * time.Minute, PendingAfter: 10 * time.Minute, Recheck: 3 * time.Second, PageSize: 500,
		CSVPageSize: 100, SubscriptionPageSize: 100, CopiedCSVsAbove: DefaultCopiedCSVsAbove, Now: time.Now}
}

// Report is the outcome of an audit.
type Report struct {
	Findings []Finding `json:"findings"`
	// Checked counts the objects read, by kind.
	Checked map[string]int `json:"checked"`
	// Pages counts the List requests the audit sent, by kind: what it cost the apiserver.
	Pages map[string]int `json:"pages,omitempty"`
	// Skipped lists checks that could not run (a kind not installed, or not readable).
	Skipped []string `json:"skipped,omitempty"`
}

// Audit lists what the checks need and runs them.
func Audit(ctx context.Context, c client.Reader, o Options) (*Report, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	if o.CSVPageSize <= 0 {
		o.CSVPageSize = o.PageSize
	}
	if o.SubscriptionPageSize <= 0 {
		o.SubscriptionPageSize = o.PageSize
	}
	r := &Report{Checked: map[string]int{}, Pages: map[string]int{}}
	a := auditor{c: c, o: o, r: r}

	var subs []*v1alpha1.Subscription
	var plans []*v1alpha1.InstallPlan
	var okSubs, okPlans bool
	if o.Shared != nil {
		subs, okSubs = sharedList(&a, "Subscriptions", func() ([]*v1alpha1.Subscription, error) { return o.Shared.Subscriptions(ctx, o.Namespace) })
		plans, okPlans = sharedList(&a, "InstallPlans", func() ([]*v1alpha1.InstallPlan, error) { return o.Shared.InstallPlans(ctx, o.Namespace) })
	} else {
		okSubs = a.list(ctx, "Subscriptions", "F1, F2", &v1alpha1.SubscriptionList{}, func(l client.ObjectList) {
			items := l.(*v1alpha1.SubscriptionList).Items
			for i := range items {
				items[i] = trimMetadata(items[i])
				subs = append(subs, &items[i])
			}
		}, client.Limit(o.SubscriptionPageSize))
		okPlans = a.list(ctx, "InstallPlans", "F1, F2", &v1alpha1.InstallPlanList{}, func(l client.ObjectList) {
			items := l.(*v1alpha1.InstallPlanList).Items
			for i := range items {
				items[i] = TrimInstallPlan(items[i])
				plans = append(plans, &items[i])
			}
		})
	}
	if okSubs && okPlans {
		r.Findings = append(r.Findings, CheckInstallPlans(plans, subs)...)
		drifting, err := a.settledDrift(ctx, CheckSubscriptions(subs, plans, o.Now()))
		if err != nil {
			return nil, err
		}
		r.Findings = append(r.Findings, drifting...)
	}

	// CSVs are read a page at a time and kept without their spec (install strategy, icons).
	var csvItems []CSV
	var csvStatus []v1alpha1.ClusterServiceVersion
	csvOpts := []client.ListOption{client.Limit(o.CSVPageSize)}
	if o.SkipCopiedCSVs {
		notCopied, err := labels.Parse("!" + olm.CopiedFromLabel)
		if err != nil {
			return nil, err
		}
		csvOpts = append(csvOpts, client.MatchingLabelsSelector{Selector: notCopied})
	}
	okCSVs := a.list(ctx, "ClusterServiceVersions", "F3, OLM", &v1alpha1.ClusterServiceVersionList{}, func(l client.ObjectList) {
		for _, c := range l.(*v1alpha1.ClusterServiceVersionList).Items {
			c = TrimCSV(c)
			csvItems = append(csvItems, CSV{ObjectMeta: c.ObjectMeta})
			csvStatus = append(csvStatus, c)
		}
	}, csvOpts...)
	if okCSVs {
		r.Findings = append(r.Findings, CheckCSVs(csvItems, o.Now(), o.StuckAfter)...)
		r.Findings = append(r.Findings, CheckStuckCSVs(csvStatus, o.Now(), o.PendingAfter)...)
		r.Findings = append(r.Findings, CheckReplacesCycles(csvStatus)...)
		if okSubs {
			r.Findings = append(r.Findings, CheckOrphanCSVs(csvStatus, subs)...)
			r.Findings = append(r.Findings, CheckBlockingCSVs(csvItems, subs, o.Now())...)
		}
	}
	var ogs []olmv1.OperatorGroup
	okOGs := a.list(ctx, "OperatorGroups", "OLM", &olmv1.OperatorGroupList{}, func(l client.ObjectList) {
		ogs = append(ogs, l.(*olmv1.OperatorGroupList).Items...)
	})
	if okOGs && okSubs && okCSVs {
		r.Findings = append(r.Findings, CheckOperatorGroups(ogs, subs, csvStatus)...)
	}
	if okOGs && okCSVs && o.CopiedCSVsAbove > 0 && o.Namespace == "" {
		if cfg, ok := a.copiedCSVs(ctx); ok {
			r.Findings = append(r.Findings, CheckCopiedCSVs(CopySources(csvStatus, ogs, cfg.Namespaces), cfg, o.CopiedCSVsAbove)...)
		}
	}

	var jobs []batchv1.Job
	if a.list(ctx, "Jobs", "F4", &batchv1.JobList{}, func(l client.ObjectList) {
		for _, j := range l.(*batchv1.JobList).Items {
			if unpack.ConfigMapOwner(&j) != "" {
				j.Spec.Template = corev1.PodTemplateSpec{} // only owners and labels are read
				j.ManagedFields, j.Annotations = nil, nil
				jobs = append(jobs, j)
			}
		}
	}) {
		owners := a.unpackConfigMaps(ctx)
		r.Findings = append(r.Findings, CheckUnpackJobs(jobs, owners)...)
		if okSubs && okPlans && okOGs {
			r.Findings = append(r.Findings, CheckUnpackFailures(jobs, owners, subs, plans, ogs)...)
		}
	}

	var pods []corev1.Pod
	var nodes []corev1.Node
	okPods := a.list(ctx, "catalog Pods", "F5", &corev1.PodList{}, func(l client.ObjectList) {
		pods = append(pods, l.(*corev1.PodList).Items...)
	}, client.HasLabels{olm.CatalogSourceLabel})
	okNodes := a.listCluster(ctx, "Nodes", "F5", &corev1.NodeList{}, func(l client.ObjectList) {
		nodes = append(nodes, l.(*corev1.NodeList).Items...)
	})
	var cats []v1alpha1.CatalogSource
	okCats := a.list(ctx, "CatalogSources", "OLM", &v1alpha1.CatalogSourceList{}, func(l client.ObjectList) {
		cats = append(cats, l.(*v1alpha1.CatalogSourceList).Items...)
	})
	if okPods && okNodes {
		r.Findings = append(r.Findings, CheckCatalogPods(pods, nodes, o.Now(), o.StuckAfter, CatalogPodOwned(cats, okCats))...)
	}
	if okCats {
		r.Findings = append(r.Findings, CheckCatalogSources(cats, o.Now(), o.PendingAfter)...)
	}
	if svc, ok := a.packageServer(ctx); ok {
		r.Findings = append(r.Findings, CheckPackageServer(svc)...)
	}
	if a.err != nil {
		return nil, a.err
	}
	Sort(r.Findings)
	return r, nil
}

type auditor struct {
	c   client.Reader
	o   Options
	r   *Report
	err error
}

func (a *auditor) progress(format string, args ...any) {
	if a.o.Progress != nil {
		fmt.Fprintf(a.o.Progress, format+"\n", args...)
	}
}

// list reads every page of a namespaced kind (in Options.Namespace when set). A kind that is not
// installed or not readable skips its checks and is recorded; other errors end the audit.
func (a *auditor) list(ctx context.Context, what, classes string, l client.ObjectList, each func(client.ObjectList), opts ...client.ListOption) bool {
	if a.o.Namespace != "" {
		opts = append(opts, client.InNamespace(a.o.Namespace))
	}
	return a.listCluster(ctx, what, classes, l, each, opts...)
}

// listCluster reads every page of a kind. A client.Limit among opts overrides Options.PageSize.
func (a *auditor) listCluster(ctx context.Context, what, classes string, l client.ObjectList, each func(client.ObjectList), opts ...client.ListOption) bool {
	if a.err != nil {
		return false
	}
	opts = append([]client.ListOption{client.Limit(a.o.PageSize)}, opts...)
	n, pages := 0, 0
	cont := ""
	for {
		page := l.DeepCopyObject().(client.ObjectList)
		err := a.c.List(ctx, page, append(opts, client.Continue(cont))...)
		if err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				a.r.Skipped = append(a.r.Skipped, fmt.Sprintf("%s checks: cannot list %s: %v", classes, what, err))
				return false
			}
			a.err = fmt.Errorf("listing %s: %w", what, err)
			return false
		}
		each(page)
		n += meta.LenList(page)
		pages++
		cont = page.GetContinue()
		if cont == "" {
			break
		}
		a.progress("  %s: %d read...", what, n)
	}
	if pages > 1 {
		a.progress("  %s: %d read", what, n)
	}
	a.r.Checked[what] += n
	a.r.Pages[what] += pages
	return true
}

// settledDrift re-reads the Subscriptions in drift after Options.Recheck, with their plans, and
// keeps those whose drift is unchanged.
func (a *auditor) settledDrift(ctx context.Context, found []Finding) ([]Finding, error) {
	if len(found) == 0 || a.o.Recheck <= 0 {
		return found, nil
	}
	a.progress("  %d Subscription(s) out of step with their InstallPlan: checking again in %s", len(found), a.o.Recheck)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(a.o.Recheck):
	}
	var kept []Finding
	for _, f := range found {
		sub := &v1alpha1.Subscription{}
		if err := a.c.Get(ctx, types.NamespacedName{Namespace: f.Namespace, Name: f.Name}, sub); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		var plans []*v1alpha1.InstallPlan
		if key, ok := drift.PlanKey(sub); ok {
			plan := &v1alpha1.InstallPlan{}
			switch err := a.c.Get(ctx, key, plan); {
			case err == nil:
				plans = append(plans, plan)
			case !apierrors.IsNotFound(err):
				return nil, err
			}
		}
		again := CheckSubscriptions([]*v1alpha1.Subscription{sub}, plans, a.o.Now())
		if len(again) == 1 && again[0].Problem == f.Problem {
			kept = append(kept, again[0])
		}
	}
	return kept, nil
}

// unpackConfigMaps reads, once each, the ConfigMaps that the Jobs' ConfigMap ownerReferences
// name (a Get each, only for the Jobs a check asks about: those OLM cannot see, and failed ones),
// and tells whether each is one of OLM's unpack ConfigMaps with the reference's UID. A name that
// is not a valid ConfigMap name is not read. An error other than NotFound ends the audit.
func (a *auditor) unpackConfigMaps(ctx context.Context) UnpackConfigMaps {
	seen := map[types.NamespacedName]*corev1.ConfigMap{}
	return func(ns string, ref metav1.OwnerReference) bool {
		if a.err != nil || kubectlcmd.ValidateName("ConfigMap", ref.Name) != nil {
			return false
		}
		key := types.NamespacedName{Namespace: ns, Name: ref.Name}
		cm, ok := seen[key]
		if !ok {
			cm = &corev1.ConfigMap{}
			if err := a.c.Get(ctx, key, cm); err != nil {
				if !apierrors.IsNotFound(err) {
					a.err = fmt.Errorf("reading ConfigMap %s: %w", key, err)
				}
				cm = nil
			} else {
				// Only what IsUnpackOwner reads is kept: bundle ConfigMaps hold whole manifests.
				cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, UID: cm.UID,
					Labels: cm.Labels, OwnerReferences: cm.OwnerReferences}}
			}
			seen[key] = cm
		}
		return cm != nil && unpack.IsUnpackOwner(cm, ref)
	}
}

// packageServer reads OLM's packages APIService; nil when there is none. It reports false when the
// check cannot run (recorded as skipped, or as the audit's error).
// copiedCSVs counts the namespaces (metadata only) and reads OLMConfig's copy switch.
func (a *auditor) copiedCSVs(ctx context.Context) (CopiedCSVs, bool) {
	var cfg CopiedCSVs
	nsList := &metav1.PartialObjectMetadataList{}
	nsList.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if !a.listCluster(ctx, "Namespaces", "OLM", nsList, func(l client.ObjectList) {
		cfg.Namespaces += meta.LenList(l)
	}) {
		return cfg, false
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: olm.Group, Version: olm.OLMConfigVersion, Kind: olm.OLMConfigKind})
	err := a.c.Get(ctx, types.NamespacedName{Name: olm.OLMConfigName}, u)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err): // no OLMConfig, or OLM before v0.20: copies on
		return cfg, true
	case apierrors.IsForbidden(err):
		a.r.Skipped = append(a.r.Skipped, fmt.Sprintf("OLM checks: cannot get OLMConfig %s: %v", olm.OLMConfigName, err))
		return cfg, false
	case err != nil:
		a.err = fmt.Errorf("reading OLMConfig %s: %w", olm.OLMConfigName, err)
		return cfg, false
	}
	cfg.OLMConfigFound = true
	cfg.Disabled, _, _ = unstructured.NestedBool(u.Object, "spec", "features", "disableCopiedCSVs")
	return cfg, true
}

func (a *auditor) packageServer(ctx context.Context) (*APIService, bool) {
	if a.err != nil {
		return nil, false
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
	err := a.c.Get(ctx, types.NamespacedName{Name: PackageServerAPIService}, u)
	switch {
	case apierrors.IsNotFound(err):
		return nil, true
	case apierrors.IsForbidden(err) || meta.IsNoMatchError(err):
		a.r.Skipped = append(a.r.Skipped, fmt.Sprintf("OLM checks: cannot get APIService %s: %v", PackageServerAPIService, err))
		return nil, false
	case err != nil:
		a.err = fmt.Errorf("reading APIService %s: %w", PackageServerAPIService, err)
		return nil, false
	}
	var obj struct {
		Spec struct {
			Service *APIServiceRef `json:"service"`
		} `json:"spec"`
		Status struct {
			Conditions []APIServiceCondition `json:"conditions"`
		} `json:"status"`
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &obj); err != nil {
		a.err = fmt.Errorf("reading APIService %s: %w", PackageServerAPIService, err)
		return nil, false
	}
	a.r.Checked["APIServices"]++
	return &APIService{Name: u.GetName(), Service: obj.Spec.Service, Conditions: obj.Status.Conditions}, true
}

// sharedList reads one kind from Options.Shared: an error ends the audit, as a failed List does.
func sharedList[T any](a *auditor, what string, read func() ([]*T, error)) ([]*T, bool) {
	if a.err != nil {
		return nil, false
	}
	items, err := read()
	if err != nil {
		a.err = fmt.Errorf("reading %s: %w", what, err)
		return nil, false
	}
	a.r.Checked[what] += len(items)
	return items, true
}

// TrimCSV is what an audit keeps of a listed CSV: of its spec only spec.replaces (the
// replaces-cycle check), no managed fields, and only the annotations a check reads. alm-examples alone is often 10 to 100 KB; kept for every CSV of a
// cluster it would be most of doctor's memory.
func TrimCSV(c v1alpha1.ClusterServiceVersion) v1alpha1.ClusterServiceVersion {
	c.Spec = v1alpha1.ClusterServiceVersionSpec{Replaces: c.Spec.Replaces}
	c.ManagedFields = nil
	c.Annotations = cacheneeds.Keep(c.Annotations, []string{olm.OperatorNamespaceAnnotation, olmguard.CleanupAnnotation})
	return c
}

// trimMetadata drops what no check reads of an object's metadata: managed fields (often a
// kilobyte an object) and annotations. An audit keeps every Subscription and InstallPlan of the
// cluster at once, 20,000 each on a cluster of 2,000 namespaces.
func trimMetadata[T any, PT interface {
	*T
	SetManagedFields([]metav1.ManagedFieldsEntry)
	SetAnnotations(map[string]string)
}](o T) T {
	PT(&o).SetManagedFields(nil)
	PT(&o).SetAnnotations(nil)
	return o
}

// TrimInstallPlan is what an audit keeps of a listed InstallPlan: trimMetadata's, and no step (an
// operator's plan often has dozens, and OLM before bundle unpacking put whole manifests there);
// no check reads them.
func TrimInstallPlan(p v1alpha1.InstallPlan) v1alpha1.InstallPlan {
	p = trimMetadata(p)
	p.Status.DropSteps()
	return p
}
