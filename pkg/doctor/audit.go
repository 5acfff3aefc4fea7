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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/drift"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/unpack"
)

// Options configure an audit.
type Options struct {
	// Namespace limits the audit to one namespace; "" audits all of them. Nodes are always read.
	Namespace string
	// StuckAfter is how long a CSV or catalog pod may be terminating before it counts as stuck.
	StuckAfter time.Duration
	// Recheck is how long to wait before reading Subscriptions in drift again: only a drift that
	// is still there, unchanged, is reported (OLM may just be a moment behind). 0 reports at once.
	Recheck time.Duration
	// PageSize is the List page size; progress is printed for lists longer than one page.
	PageSize int64
	// Progress receives progress lines (nil: none).
	Progress io.Writer
	Now      func() time.Time
}

// DefaultOptions returns the defaults of `kubectl olmguard doctor`.
func DefaultOptions() Options {
	return Options{StuckAfter: 5 * time.Minute, Recheck: 3 * time.Second, PageSize: 500, Now: time.Now}
}

// Report is the outcome of an audit.
type Report struct {
	Findings []Finding `json:"findings"`
	// Checked counts the objects read, by kind.
	Checked map[string]int `json:"checked"`
	// Skipped lists checks that could not run (a kind not installed, or not readable).
	Skipped []string `json:"skipped,omitempty"`
}

// Audit lists what the checks need and runs them.
func Audit(ctx context.Context, c client.Client, o Options) (*Report, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PageSize <= 0 {
		o.PageSize = 500
	}
	r := &Report{Checked: map[string]int{}}
	a := auditor{c: c, o: o, r: r}

	var subs []v1alpha1.Subscription
	var plans []v1alpha1.InstallPlan
	okSubs := a.list(ctx, "Subscriptions", "F1, F2", &v1alpha1.SubscriptionList{}, func(l client.ObjectList) {
		subs = append(subs, l.(*v1alpha1.SubscriptionList).Items...)
	})
	okPlans := a.list(ctx, "InstallPlans", "F1, F2", &v1alpha1.InstallPlanList{}, func(l client.ObjectList) {
		plans = append(plans, l.(*v1alpha1.InstallPlanList).Items...)
	})
	if okSubs && okPlans {
		r.Findings = append(r.Findings, CheckInstallPlans(plans, subs)...)
		drifting, err := a.settledDrift(ctx, CheckSubscriptions(subs, plans))
		if err != nil {
			return nil, err
		}
		r.Findings = append(r.Findings, drifting...)
	}

	csvs := &metav1.PartialObjectMetadataList{}
	csvs.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(olm.ClusterServiceVersionKind + "List"))
	var csvItems []CSV
	if a.list(ctx, "ClusterServiceVersions", "F3", csvs, func(l client.ObjectList) {
		csvItems = append(csvItems, l.(*metav1.PartialObjectMetadataList).Items...)
	}) {
		r.Findings = append(r.Findings, CheckCSVs(csvItems, o.Now(), o.StuckAfter)...)
		if okSubs {
			r.Findings = append(r.Findings, CheckOrphanCSVs(csvItems, subs)...)
		}
	}

	var jobs []batchv1.Job
	if a.list(ctx, "Jobs", "F4", &batchv1.JobList{}, func(l client.ObjectList) {
		for _, j := range l.(*batchv1.JobList).Items {
			if unpack.ConfigMapOwner(&j) != "" {
				j.Spec.Template = corev1.PodTemplateSpec{} // only owners and labels are read
				jobs = append(jobs, j)
			}
		}
	}) {
		found, err := a.unpackJobs(ctx, jobs)
		if err != nil {
			return nil, err
		}
		r.Findings = append(r.Findings, found...)
	}

	var pods []corev1.Pod
	var nodes []corev1.Node
	okPods := a.list(ctx, "catalog Pods", "F5", &corev1.PodList{}, func(l client.ObjectList) {
		pods = append(pods, l.(*corev1.PodList).Items...)
	}, client.HasLabels{olm.CatalogSourceLabel})
	okNodes := a.listCluster(ctx, "Nodes", "F5", &corev1.NodeList{}, func(l client.ObjectList) {
		nodes = append(nodes, l.(*corev1.NodeList).Items...)
	})
	if okPods && okNodes {
		r.Findings = append(r.Findings, CheckCatalogPods(pods, nodes, o.Now(), o.StuckAfter)...)
	}
	if a.err != nil {
		return nil, a.err
	}
	Sort(r.Findings)
	return r, nil
}

type auditor struct {
	c   client.Client
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

func (a *auditor) listCluster(ctx context.Context, what, classes string, l client.ObjectList, each func(client.ObjectList), opts ...client.ListOption) bool {
	if a.err != nil {
		return false
	}
	n, pages := 0, 0
	cont := ""
	for {
		page := l.DeepCopyObject().(client.ObjectList)
		err := a.c.List(ctx, page, append(opts, client.Limit(a.o.PageSize), client.Continue(cont))...)
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
		plan, err := drift.ReferencedPlan(ctx, a.c, sub)
		if err != nil {
			return nil, err
		}
		var plans []v1alpha1.InstallPlan
		if plan != nil {
			plans = append(plans, *plan)
		}
		again := CheckSubscriptions([]v1alpha1.Subscription{*sub}, plans)
		if len(again) == 1 && again[0].Problem == f.Problem {
			kept = append(kept, again[0])
		}
	}
	return kept, nil
}

// unpackJobs runs the F4 check, reading each owning ConfigMap once.
func (a *auditor) unpackJobs(ctx context.Context, jobs []batchv1.Job) ([]Finding, error) {
	seen := map[types.NamespacedName]bool{}
	var err error
	found := CheckUnpackJobs(jobs, func(ns, name string) bool {
		key := types.NamespacedName{Namespace: ns, Name: name}
		if v, ok := seen[key]; ok || err != nil {
			return v
		}
		cm := &corev1.ConfigMap{}
		if e := a.c.Get(ctx, key, cm); e != nil {
			if !apierrors.IsNotFound(e) {
				err = fmt.Errorf("reading ConfigMap %s: %w", key, e)
			}
			seen[key] = false
			return false
		}
		seen[key] = unpack.IsOLMConfigMap(cm)
		return seen[key]
	})
	return found, err
}
