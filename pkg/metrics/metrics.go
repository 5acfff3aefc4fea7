// Package metrics defines olmguard's Prometheus metrics, registered with controller-runtime's
// registry so both binaries serve them on /metrics. Every name starts with olmguard_.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// Mutations counts admission requests a mutating webhook answered with a patch, by webhook.
	Mutations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_mutations_total",
		Help: "Admission requests answered with a patch, by webhook.",
	}, []string{"webhook"})
	// LookupErrors counts admission requests let through unchanged because a lookup failed
	// (the controller repairs those objects later).
	LookupErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_lookup_errors_total",
		Help: "Admission requests allowed unchanged because a lookup failed, by webhook.",
	}, []string{"webhook"})
	// InstallPlanRepairs counts InstallPlans the controller patched with missing Subscription owners.
	InstallPlanRepairs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "olmguard_installplan_owner_repairs_total",
		Help: "InstallPlans the controller patched to add missing Subscription ownerReferences.",
	})

	// CatalogPodRecoveries counts catalog pods force-deleted so OLM recreates them, by reason.
	CatalogPodRecoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_catalog_pod_recoveries_total",
		Help: "Catalog pods force-deleted from NotReady or missing nodes so OLM recreates them, by reason.",
	}, []string{"reason"})
	// CatalogPodRecoveriesHeld counts recoveries olmguard held back, by reason (ClusterOutage,
	// ZoneOutage, RateLimited).
	CatalogPodRecoveriesHeld = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_catalog_pod_recoveries_held_total",
		Help: "Catalog pod recoveries held back by the outage guard or the rate limit, by reason.",
	}, []string{"reason"})

	// UnpackJobRepairs counts unpack Jobs the controller labelled or deleted, by action and reason.
	UnpackJobRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_unpack_job_repairs_total",
		Help: "Bundle unpack Jobs the controller labelled (so OLM sees them) or deleted, by action and reason.",
	}, []string{"action", "reason"})

	// CleanupDeletions counts objects the CSV cleanup deleted, by kind (cluster, operand).
	CleanupDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_csv_cleanup_deletions_total",
		Help: "Objects deleted by the CSV cleanup finalizer, by kind of object (cluster, operand).",
	}, []string{"kind"})
	// CleanupTimeouts counts cleanups that gave up after --cleanup-timeout.
	CleanupTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "olmguard_csv_cleanup_timeouts_total",
		Help: "CSV cleanups that released their finalizer after --cleanup-timeout without finishing.",
	})
)

func init() {
	metrics.Registry.MustRegister(Mutations, LookupErrors, InstallPlanRepairs, CatalogPodRecoveries, CatalogPodRecoveriesHeld,
		UnpackJobRepairs, CleanupDeletions, CleanupTimeouts)
}
