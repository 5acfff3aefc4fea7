// Package olmguard holds olmguard's own names: the finalizer and annotations it puts on OLM's
// objects, the names of its Kubernetes objects, its admission paths and its metrics prefix.
// Manifests, the webhook, the controller and the kubectl plugin must agree on these, so they live
// in one place. Constants only.
package olmguard

// Name is the product name, also the value of the app.kubernetes.io/name label.
const Name = "olmguard"

// Labels olmguard puts on its own objects.
const (
	NameLabel      = "app.kubernetes.io/name"
	ComponentLabel = "app.kubernetes.io/component"
)

// CleanupFinalizer is injected into CSVs so that the controller can clean up after an uninstall.
const CleanupFinalizer = "olmguard.io/cleanup"

// CleanupTrackedLabel marks a CSV labelled olm.copiedFrom that holds CleanupFinalizer: the
// controller leaves OLM's copies (olm.copiedFrom) out of its cache, and caches such a CSV
// because it carries this label. The webhook puts it on every write that would otherwise hide a
// finalized CSV, and the controller on those it finds without it.
const CleanupTrackedLabel = "olmguard.io/cleanup-tracked"

// Annotations olmguard reads or writes.
const (
	AnnotationPrefix = "olmguard.io/"
	// CleanupAnnotation set to CleanupDisabled on a CSV opts it out of the cleanup finalizer.
	CleanupAnnotation = AnnotationPrefix + "cleanup"
	CleanupDisabled   = "disabled"
	// ResyncAnnotation is bumped on OLM objects to make OLM re-reconcile them.
	ResyncAnnotation = AnnotationPrefix + "resync"
	// WebhookProbeLabel marks the ConfigMap the controller's webhook probe (and doctor) create
	// with a server-side dry run in olmguard's own namespace; the webhook answers only such a
	// dry run there (pkg/webhookprobe).
	WebhookProbeLabel = AnnotationPrefix + "webhook-probe"
	// WebhookProbeAnswerAnnotation is what the webhook adds to the probe object: seeing it in
	// the dry run's answer proves the kube-apiserver called the webhook.
	WebhookProbeAnswerAnnotation = AnnotationPrefix + "webhook-probe-answer"
)

// Default names of olmguard's own objects.
const (
	DefaultNamespace = "olmguard-system"
	// WebhookServiceName is the Service in front of the webhook pods.
	WebhookServiceName = "olmguard-webhook"
	// WebhookTLSSecretName holds the webhook's serving certificate (tls.crt, tls.key, ca.crt).
	WebhookTLSSecretName = "olmguard-webhook-tls"
	// MutatingWebhookConfigurationName and ValidatingWebhookConfigurationName are the only
	// webhook configurations olmguard writes.
	MutatingWebhookConfigurationName   = "olmguard-mutating"
	ValidatingWebhookConfigurationName = "olmguard-validating"
	// ControllerLeaderElectionID is the Lease the controller replicas compete for.
	ControllerLeaderElectionID = "olmguard-controller"
	// FieldManager is the field manager of every write olmguard makes.
	FieldManager = "olmguard"
)

// Admission paths served by the webhook.
const (
	MutateClusterServiceVersionsPath = "/mutate/clusterserviceversions"
	MutateInstallPlansPath           = "/mutate/installplans"
	MutateJobsPath                   = "/mutate/jobs"
	MutateServiceAccountsPath        = "/mutate/serviceaccounts"
	// MutateWebhookProbePath answers the reachability probe (pkg/webhookprobe).
	MutateWebhookProbePath             = "/mutate/webhook-probe"
	ValidateSubscriptionsPath          = "/validate/subscriptions"
	ValidateInstallPlansPath           = "/validate/installplans"
	ValidateClusterServiceVersionsPath = "/validate/clusterserviceversions"
	ValidateOperatorGroupsPath         = "/validate/operatorgroups"
	ValidateCatalogSourcesPath         = "/validate/catalogsources"
	// ValidateCSVReplacesPath judges a CSV's spec.replaces (the replaces-cycle guard).
	ValidateCSVReplacesPath = "/validate/clusterserviceversions-replaces"
)

// MetricsPrefix starts the name of every metric olmguard exports.
const MetricsPrefix = "olmguard_"
