// Package metrics defines olmguard's Prometheus metrics, registered with controller-runtime's
// registry so both binaries serve them on /metrics. Every name starts with olmguard_.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// WebhookRequests counts every admission answer by path and result (allowed, patched,
	// denied, error: a handler failed and the request was admitted unchanged).
	WebhookRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_requests_total",
		Help: "Admission requests answered by olmguard, by path and result (allowed, patched, denied, error).",
	}, []string{"path", "result"})
	// WebhookRequestsRefused counts admission calls refused before any admission logic ran, by
	// reason: unauthenticated (no client certificate from --client-ca-file with an allowed
	// CommonName) or overloaded (--max-inflight-requests reached; the kube-apiserver applies the
	// failurePolicy).
	WebhookRequestsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_requests_refused_total",
		Help: "Admission calls refused before any admission logic ran, by reason (unauthenticated: no allowed client certificate; overloaded: --max-inflight-requests reached).",
	}, []string{"reason"})
	// WebhookCertificateExpiry is the serving certificate's NotAfter.
	WebhookCertificateExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "olmguard_webhook_certificate_expiration_timestamp_seconds",
		Help: "NotAfter of the serving certificate currently loaded, in seconds since the epoch.",
	})
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
	// ReadsCapped counts admission requests let through unchanged because a lookup stopped at its
	// bound: the namespace holds more objects (or larger names) than one lookup considers
	// (pkg/admit). Each is also counted in LookupErrors.
	ReadsCapped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_reads_capped_total",
		Help: "Admission requests allowed unchanged because a lookup stopped at its bound (more objects than one lookup considers), by webhook.",
	}, []string{"webhook"})
	// SubscriptionReads counts the webhook's Subscription lookups by how they read: "consistent"
	// (linearizable: sees every Subscription committed before the request) or "watch-cache" (may
	// trail a write made a moment before; the controller repairs what such a read missed).
	SubscriptionReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_subscription_reads_total",
		Help: "Subscription lookups of the webhook by read: consistent, or watch-cache (may miss a Subscription committed a moment before; the controller repairs).",
	}, []string{"webhook", "read"})
	// PolicyViolations counts the violations the validating policies answered, by policy and by
	// the mode that applied (enforce: denied, warn: admitted with a warning).
	PolicyViolations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_policy_violations_total",
		Help: "Policy violations answered by the validating webhooks, by policy and mode (enforce: denied, warn: warned).",
	}, []string{"policy", "mode"})
	// InstallPlanRepairs counts InstallPlans the controller patched with missing Subscription owners.
	InstallPlanRepairs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "olmguard_installplan_owner_repairs_total",
		Help: "InstallPlans the controller patched to add missing Subscription ownerReferences.",
	})

	// CatalogPodRecoveries counts catalog pods force-deleted so OLM recreates them, by reason (a
	// lost node: NodeNotReady, NodeGone, PodTerminatingOnNotReadyNode; a dead pod OLM keeps:
	// PodFailed).
	CatalogPodRecoveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_catalog_pod_recoveries_total",
		Help: "Catalog pods force-deleted from NotReady or missing nodes, or in a terminal phase (Failed), so OLM recreates them, by reason.",
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

	// UnpackFailedJobsRemoved counts failed unpack Jobs removed so that OLM before v0.43 unpacks
	// again (--unpack-retry-failed), by the Job's failure reason.
	UnpackFailedJobsRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_unpack_failed_jobs_removed_total",
		Help: "Failed bundle unpack Jobs the controller removed so that OLM unpacks again (--unpack-retry-failed), by failure reason.",
	}, []string{"reason"})

	// CleanupDeletions counts objects the CSV cleanup deleted, by kind (cluster, operand, orphan).
	CleanupDeletions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_csv_cleanup_deletions_total",
		Help: "Objects deleted by the CSV cleanup, by kind of object (cluster, operand; orphan: bundled RBAC of an operator that exists nowhere).",
	}, []string{"kind"})
	// CleanupTimeouts counts cleanups that gave up after --cleanup-timeout.
	CleanupTimeouts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "olmguard_csv_cleanup_timeouts_total",
		Help: "CSV cleanups that released their finalizer after --cleanup-timeout without finishing.",
	})

	// SubscriptionDrifts counts Subscriptions reported in drift from their InstallPlan, by the
	// condition that disagreed.
	SubscriptionDrifts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_subscription_drift_total",
		Help: "Subscriptions whose InstallPlan conditions disagreed with their plan for longer than --drift-window, by condition.",
	}, []string{"condition"})
	// SubscriptionNudges counts resync annotations written to make OLM re-reconcile a Subscription.
	SubscriptionNudges = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "olmguard_subscription_nudges_total",
		Help: "Resync annotations written to Subscriptions in drift, or whose resolution failed on CSVs that are gone since, so OLM re-reconciles them.",
	})
	// SubscriptionsDrifting is how many Subscriptions are in a reported drift right now.
	SubscriptionsDrifting = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "olmguard_subscriptions_drifting",
		Help: "Subscriptions currently in a drift that outlived --drift-window.",
	})

	// AuditFindings is what the controller's last OLM audit (kubectl olmguard doctor's checks,
	// run every --audit-interval) found, by class (F1 to F5, OLM) and check.
	AuditFindings = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "olmguard_audit_findings",
		Help: "Findings of the controller's last OLM audit (kubectl olmguard doctor's checks), by class (F1-F5: olmguard heals them; OLM: it cannot) and check.",
	}, []string{"class", "check"})
	// AuditRuns counts the controller's OLM audits by result (success, error).
	AuditRuns = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_audit_runs_total",
		Help: "OLM audits the controller ran, by result (success, error).",
	}, []string{"result"})
	// AuditLastSuccess is when the last OLM audit finished without error.
	AuditLastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "olmguard_audit_last_success_timestamp_seconds",
		Help: "When the controller's last successful OLM audit finished, in seconds since the epoch.",
	})
	// AuditInterval is --audit-interval, set by the replica that audits: the alert on audits that
	// stopped succeeding measures their age in intervals.
	AuditInterval = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "olmguard_audit_interval_seconds",
		Help: "Time between two OLM audits (--audit-interval), exported by the replica that audits.",
	})
	// WebhookReachable is the last reachability probe's result (pkg/webhookprobe): 1 when the
	// kube-apiserver called olmguard's mutating webhook for the probe's dry run, 0 when it did not
	// (every webhook fails open, so admissions then go through unguarded) or the dry run failed.
	// Set by the controller replica that probes (the leader).
	WebhookReachable = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "olmguard_webhook_reachable",
		Help: "1 when the controller's last probe (a dry-run create olmguard's mutating webhook must mutate) showed the kube-apiserver calls the webhook, 0 when it did not or the dry run failed.",
	})
	// WebhookProbeFailures counts failed reachability probes by outcome (NotCalled: the answer
	// lacked the webhook's mutation; Failed: the dry run itself failed).
	WebhookProbeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olmguard_webhook_probe_failures_total",
		Help: "Reachability probes of the webhook that failed, by outcome (NotCalled: the kube-apiserver did not call the webhook; Failed: the dry run failed).",
	}, []string{"outcome"})
	// WebhookProbeLastSuccess is when a probe last saw the kube-apiserver call the webhook.
	WebhookProbeLastSuccess = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "olmguard_webhook_probe_last_success_timestamp_seconds",
		Help: "When the controller's reachability probe last saw the kube-apiserver call olmguard's webhook, in seconds since the epoch.",
	})
	// AuditSkippedChecks is how many groups of checks the last audit could not run (a kind not
	// installed or not readable).
	AuditSkippedChecks = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "olmguard_audit_skipped_checks",
		Help: "Groups of checks the controller's last OLM audit could not run (a kind not installed, or not readable).",
	})
)

// Collectors returns every metric above, as registered: the alert rules' test
// (charts/alerts_test.go) checks each metric an alert reads against them.
func Collectors() []prometheus.Collector {
	return []prometheus.Collector{WebhookRequests, WebhookRequestsRefused, WebhookCertificateExpiry, Mutations, LookupErrors, ReadsCapped, SubscriptionReads, PolicyViolations, InstallPlanRepairs, CatalogPodRecoveries, CatalogPodRecoveriesHeld,
		UnpackJobRepairs, UnpackFailedJobsRemoved, CleanupDeletions, CleanupTimeouts, SubscriptionDrifts, SubscriptionNudges, SubscriptionsDrifting,
		AuditFindings, AuditRuns, AuditLastSuccess, AuditInterval, AuditSkippedChecks,
		WebhookReachable, WebhookProbeFailures, WebhookProbeLastSuccess}
}

func init() {
	metrics.Registry.MustRegister(Collectors()...)
}
