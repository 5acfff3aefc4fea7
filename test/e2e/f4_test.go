package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/unpack"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/olmsim"
	"github.com/olmguard/olmguard/test/scenario"
)

// installSameBundle installs one bundle into n namespaces, one after another, a second apart.
func installSameBundle(t *testing.T, ctx context.Context, sim *olmsim.Sim, prefix string, n int) *olmsim.Catalog {
	t.Helper()
	cat := &olmsim.Catalog{Name: prefix, Bundles: []olmsim.Bundle{{Package: "delta", Channel: "stable", CSVName: "delta.v1.0.0",
		Version: "1.0.0", Image: "registry.example/delta-bundle:" + prefix}}}
	if err := sim.AddCatalog(ctx, cat); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ns := fmt.Sprintf("%s-%d", prefix, i)
		if err := sim.EnsureNamespace(ctx, ns); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.CreateSubscription(ctx, ns, "delta", cat, "delta", v1alpha1.ApprovalAutomatic); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Install(ctx, ns, false); err != nil {
			t.Fatalf("install %d of the same bundle: %v", i, err)
		}
		time.Sleep(time.Second)
	}
	return cat
}

// unpackJobs lists the Jobs of a catalog's bundle: by OLM's label, and by OLM's exact name.
func unpackJobs(t *testing.T, ctx context.Context, c *cluster.Cluster, cat *olmsim.Catalog) []batchv1.Job {
	t.Helper()
	name := olm.UnpackName(cat.Bundles[0].Image)
	all := &batchv1.JobList{}
	if err := c.Client.List(ctx, all, client.InNamespace(cat.Namespace)); err != nil {
		t.Fatal(err)
	}
	var out []batchv1.Job
	for _, j := range all.Items {
		if j.Name == name || j.Labels[olm.BundleUnpackRefLabel] == name || j.Name == unpack.ScopedName(cat.Namespace, name) {
			out = append(out, j)
		}
	}
	return out
}

// TestF4UnpackJobs replays OLM issue #3210 and repeated installs of one bundle across OLM
// releases, without and with olmguard.
func TestF4UnpackJobs(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	t.Run("without olmguard #3210 is stuck on AlreadyExists", func(t *testing.T) {
		sim := newSim(t, c, "olm-f4-stock", olmsim.V0_28)
		err := scenario.Replay3210(ctx, sim, "f4-stock-a", "f4-stock-b")
		if err == nil || !strings.Contains(err.Error(), "already exists") {
			t.Fatalf("second install: %v, want stuck on jobs.batch ... already exists", err)
		}
	})

	startWebhook(t, c)
	startController(t, c)
	waitWebhookActive(t, ctx, c)

	t.Run("with olmguard #3210 unpacks and plans", func(t *testing.T) {
		sim := newSim(t, c, "olm-f4-guarded", olmsim.V0_28)
		if err := scenario.Replay3210(ctx, sim, "f4-guarded-a", "f4-guarded-b"); err != nil {
			t.Fatalf("second install with olmguard: %v", err)
		}
	})

	t.Run("same bundle into five namespaces at different times: one unpack", func(t *testing.T) {
		sim := newSim(t, c, "olm-f4-five", olmsim.V0_28)
		cat := installSameBundle(t, ctx, sim, "f4-five", 5)
		jobs := unpackJobs(t, ctx, c, cat)
		if len(jobs) != 1 || !strings.HasPrefix(jobs[0].Name, unpack.NamePrefix) {
			t.Fatalf("unpack Jobs %v, want exactly one, renamed", jobNames(jobs))
		}
		if ttl := jobs[0].Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 600 {
			t.Errorf("renamed Job TTL = %v, want the webhook's default 600s", ttl)
		}
		if jobs[0].Labels[olm.BundleUnpackRefLabel] != olm.UnpackName(cat.Bundles[0].Image) || jobs[0].Labels[olm.ManagedLabel] != "true" {
			t.Errorf("renamed Job lost OLM's labels: %v", jobs[0].Labels)
		}
	})

	t.Run("OLM v0.25: nothing renamed, no Job leaks", func(t *testing.T) {
		sim := newSim(t, c, "olm-f4-v25", olmsim.V0_25)
		cat := installSameBundle(t, ctx, sim, "f4-v25", 3)
		jobs := unpackJobs(t, ctx, c, cat)
		if len(jobs) > 1 {
			t.Fatalf("unpack Jobs %v: at most one may exist", jobNames(jobs))
		}
		for _, j := range jobs {
			if strings.HasPrefix(j.Name, unpack.NamePrefix) {
				t.Fatalf("Job %s renamed: OLM v0.25 finds Jobs by name only", j.Name)
			}
		}
	})

	t.Run("OLM v0.29: renamed Jobs are found and reused", func(t *testing.T) {
		sim := newSim(t, c, "olm-f4-v29", olmsim.V0_29)
		cat := installSameBundle(t, ctx, sim, "f4-v29", 2)
		jobs := unpackJobs(t, ctx, c, cat)
		if len(jobs) != 1 || !strings.HasPrefix(jobs[0].Name, unpack.NamePrefix) {
			t.Fatalf("unpack Jobs %v, want exactly one, renamed and reused", jobNames(jobs))
		}
	})
}

func jobNames(jobs []batchv1.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return out
}
