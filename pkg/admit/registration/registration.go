// Package registration builds olmguard's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration. Build is a pure function: the webhook registers its output when
// it runs out of cluster (--register-url), and the manifests must equal its output with a Service
// client configuration, which a test checks.
package registration

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olmguard"
)

// Defaults.
const (
	// DefaultServicePort is the port of the webhook Service (it targets the server's --port).
	DefaultServicePort = 443
	// DefaultTimeoutSeconds keeps OLM's writes fast when olmguard is slow: the apiserver gives up
	// and, with failurePolicy Ignore, admits the object unchanged.
	DefaultTimeoutSeconds = 3
)

// Webhook is one entry of olmguard's webhook configurations: the path the apiserver calls and
// which requests it sends there. The list of entries is declared once, beside each entry's
// handler, in pkg/setup.
type Webhook struct {
	// Name is unique within a configuration, fully qualified as the API requires.
	Name string
	// Path is the admission path on olmguard's server.
	Path string
	// Mutating puts the entry in the MutatingWebhookConfiguration, else in the validating one.
	Mutating bool
	Rules    []admissionregistrationv1.RuleWithOperations
	// ObjectSelector narrows the objects sent (nil: all).
	ObjectSelector  *metav1.LabelSelector
	MatchConditions []admissionregistrationv1.MatchCondition
	// OwnNamespace sends objects of olmguard's own namespace only (the reachability probe),
	// instead of every namespace but kube-system and olmguard's.
	OwnNamespace bool
}

// Options describe where the apiserver finds the webhook.
type Options struct {
	// Namespace is olmguard's namespace: it holds the Service, and no object in it is sent to the
	// webhook (nor any in kube-system).
	Namespace string
	// ServiceName and ServicePort address the webhook Service when URL is empty.
	ServiceName string
	ServicePort int32
	// URL, when set (e.g. https://127.0.0.1:9443), replaces the Service: each webhook calls
	// URL + its path. Used when the server runs outside the cluster.
	URL string
	// CABundle is the PEM CA that signed the serving certificate; nil leaves it to injection.
	CABundle []byte
	// TimeoutSeconds of every webhook.
	TimeoutSeconds int32
}

// DefaultOptions address the Service of the default installation.
func DefaultOptions() Options {
	return Options{
		Namespace:      olmguard.DefaultNamespace,
		ServiceName:    olmguard.WebhookServiceName,
		ServicePort:    DefaultServicePort,
		TimeoutSeconds: DefaultTimeoutSeconds,
	}
}

// Validate reports options Build cannot turn into valid configurations.
func (o Options) Validate() error {
	if o.Namespace == "" {
		return errors.New("registration: namespace is required")
	}
	if o.TimeoutSeconds < 0 || o.TimeoutSeconds > 30 {
		return fmt.Errorf("registration: timeout %ds is out of range 1-30", o.TimeoutSeconds)
	}
	if o.URL != "" {
		return ValidateURL(o.URL)
	}
	if o.ServiceName == "" {
		return errors.New("registration: service name is required when no URL is given")
	}
	if o.ServicePort < 0 || o.ServicePort > 65535 {
		return fmt.Errorf("registration: service port %d is out of range", o.ServicePort)
	}
	return nil
}

// ValidateURL checks a base URL the apiserver can call: https, a host, nothing after the path.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("invalid register URL %q: %w", raw, err)
	}
	switch {
	case u.Scheme != "https":
		return fmt.Errorf("invalid register URL %q: the scheme must be https", raw)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("invalid register URL %q: a host is required", raw)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("invalid register URL %q: user info, query and fragment are not allowed", raw)
	}
	return nil
}

// Build returns olmguard's two webhook configurations holding hooks, in their order. Zero
// ServicePort and TimeoutSeconds take their defaults.
func Build(o Options, hooks []Webhook) (*admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	if o.ServicePort == 0 {
		o.ServicePort = DefaultServicePort
	}
	if o.TimeoutSeconds == 0 {
		o.TimeoutSeconds = DefaultTimeoutSeconds
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: olmguard.MutatingWebhookConfigurationName, Labels: labels()},
	}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: olmguard.ValidatingWebhookConfigurationName, Labels: labels()},
	}
	for _, h := range hooks {
		if h.Mutating {
			mutating.Webhooks = append(mutating.Webhooks, mutatingWebhook(o, h))
		} else {
			validating.Webhooks = append(validating.Webhooks, validatingWebhook(o, h))
		}
	}
	return mutating, validating
}

// OLMRule sends the main resource of one of OLM's v1alpha1 kinds, for ops. Status writes (the
// /status subresource) are never sent.
func OLMRule(resource string, ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{olm.Group}, APIVersions: []string{"v1alpha1"},
			Resources: []string{resource}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// OperatorGroupRule sends OperatorGroups (operators.coreos.com/v1, the storage version; the
// Equivalent match policy also sends v1alpha2 writes, converted to v1), for ops.
func OperatorGroupRule(ops ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
	r := OLMRule("operatorgroups", ops...)
	r[0].APIVersions = []string{"v1"}
	return r
}

// JobCreates sends Job creations.
func JobCreates() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"batch"}, APIVersions: []string{"v1"},
			Resources: []string{"jobs"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// UnpackJobLabels selects the Jobs OLM (>= v0.26) finds by label, its bundle unpack Jobs.
func UnpackJobLabels() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: olm.BundleUnpackRefLabel, Operator: metav1.LabelSelectorOpExists},
		{Key: olm.ManagedLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{olm.ManagedLabelValue}},
	}}
}

// ServiceAccountUpdates sends updates of core v1 ServiceAccounts (a PATCH arrives as an UPDATE).
func ServiceAccountUpdates() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: []string{"serviceaccounts"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// ByOLMServiceAccount sends only requests made by a ServiceAccount named as OLM's
// (olm-operator-serviceaccount, in any namespace): every other write of a ServiceAccount, the
// kube-controller-manager's and the users', never reaches olmguard. The handler checks the exact
// identity (--olm-users), which may change without the configuration changing.
func ByOLMServiceAccount() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{
		Name: "by-olm-service-account",
		Expression: "request.userInfo.username.startsWith('system:serviceaccount:') && " +
			"request.userInfo.username.endsWith(" + celString(":"+olm.ServiceAccountName) + ")",
	}}
}

// WithoutCleanupFinalizer sends only CSVs that are not being deleted, lack olmguard's finalizer
// and did not opt out: CSVs can be megabytes, so the others are not sent at all. OLM's copies
// (label olm.copiedFrom) are left out too, they own nothing, unless the update takes olmguard's
// finalizer off: OLM never finalizes nor relabels a copy, so such an update comes from someone
// who labelled a guarded CSV as a copy to drop its cleanup (issue 31 item 7). An object selector
// on the label could not tell the two apart: once both objects carry it, nothing is sent.
//
// It also sends a CSV labelled olm.copiedFrom that holds the finalizer without the label
// olmguard.io/cleanup-tracked, being deleted or not: the controller caches such a CSV only by that
// label (its cache leaves OLM's copies out, issue 32). One condition, since the apiserver ANDs a
// webhook's conditions.
func WithoutCleanupFinalizer() []admissionregistrationv1.MatchCondition {
	finalizer, annotation := celString(olmguard.CleanupFinalizer), celString(olmguard.CleanupAnnotation)
	copied, tracked := celString(olm.CopiedFromLabel), celString(olmguard.CleanupTrackedLabel)
	labelled := "has(object.metadata.labels) && " + copied + " in object.metadata.labels"
	finalized := "has(object.metadata.finalizers) && " + finalizer + " in object.metadata.finalizers"
	needsFinalizer := []string{
		"(!(" + labelled + ") || (oldObject != null && has(oldObject.metadata.finalizers) && " + finalizer + " in oldObject.metadata.finalizers))",
		"!has(object.metadata.deletionTimestamp)",
		"!(" + finalized + ")",
		"(!has(object.metadata.annotations) || !(" + annotation + " in object.metadata.annotations) || object.metadata.annotations[" + annotation + "] != " + celString(olmguard.CleanupDisabled) + ")",
	}
	needsTracking := labelled + " && " + finalized + " && !(" + tracked + " in object.metadata.labels)"
	return []admissionregistrationv1.MatchCondition{{
		Name:       "finalizer-or-tracking-label-missing",
		Expression: "(" + strings.Join(needsFinalizer, " && ") + ") || (" + needsTracking + ")",
	}}
}

// CleanupFinalizerRemoved sends only updates that remove olmguard's finalizer.
func CleanupFinalizerRemoved() []admissionregistrationv1.MatchCondition {
	finalizer := celString(olmguard.CleanupFinalizer)
	return []admissionregistrationv1.MatchCondition{{
		Name: "cleanup-finalizer-removed",
		Expression: "has(oldObject.metadata.finalizers) && " + finalizer + " in oldObject.metadata.finalizers && " +
			"!(has(object.metadata.finalizers) && " + finalizer + " in object.metadata.finalizers)",
	}}
}

// ReplacesWritten sends only the CSV writes the replaces-cycle guard judges: a create with a
// spec.replaces, and an update that changes spec.replaces or takes the olm.copiedFrom label off
// (a copy is outside OLM's walk; a CSV that stops being one joins it). OLM writes spec.replaces
// once, when it creates the CSV, so none of OLM's updates (its finalizer, annotations) is sent:
// a CSV is often megabytes.
func ReplacesWritten() []admissionregistrationv1.MatchCondition {
	copied := celString(olm.CopiedFromLabel)
	return []admissionregistrationv1.MatchCondition{{
		Name: "replaces-written",
		Expression: "has(object.spec) && has(object.spec.replaces) && object.spec.replaces != '' && (oldObject == null || " +
			"!has(oldObject.spec) || !has(oldObject.spec.replaces) || oldObject.spec.replaces != object.spec.replaces || " +
			"(has(oldObject.metadata.labels) && " + copied + " in oldObject.metadata.labels && !(has(object.metadata.labels) && " + copied + " in object.metadata.labels)))",
	}}
}

// WebhookProbeCreates sends ConfigMap creations: with WebhookProbeLabels, OwnNamespace and
// DryRunOnly, only the reachability probe's (pkg/webhookprobe).
func WebhookProbeCreates() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"},
			Resources: []string{"configmaps"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}

// WebhookProbeLabels selects the objects marked as the reachability probe.
func WebhookProbeLabels() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: olmguard.WebhookProbeLabel, Operator: metav1.LabelSelectorOpExists},
	}}
}

// DryRunOnly sends only dry-run requests: nothing the probe's path answers is ever stored.
func DryRunOnly() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{Name: "dry-run-only", Expression: "has(request.dryRun) && request.dryRun"}}
}

// OwnNamespaceSelector selects olmguard's namespace only.
func OwnNamespaceSelector(namespace string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{namespace},
	}}}
}

// ExcludedNamespaces are the namespaces whose objects are never sent to olmguard.
func ExcludedNamespaces(namespace string) []string {
	ns := []string{"kube-system"}
	if namespace != "" && !slices.Contains(ns, namespace) {
		ns = append(ns, namespace)
	}
	return ns
}

func mutatingWebhook(o Options, h Webhook) admissionregistrationv1.MutatingWebhook {
	c := common(o, h.Path, h.ObjectSelector)
	if h.OwnNamespace {
		c.namespaceSelector = OwnNamespaceSelector(o.Namespace)
	}
	return admissionregistrationv1.MutatingWebhook{
		Name: h.Name, ClientConfig: c.clientConfig, Rules: h.Rules,
		FailurePolicy: c.failurePolicy, MatchPolicy: c.matchPolicy,
		NamespaceSelector: c.namespaceSelector, ObjectSelector: c.objectSelector,
		SideEffects: c.sideEffects, TimeoutSeconds: c.timeout, AdmissionReviewVersions: c.versions,
		ReinvocationPolicy: ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
		MatchConditions:    h.MatchConditions,
	}
}

func validatingWebhook(o Options, h Webhook) admissionregistrationv1.ValidatingWebhook {
	c := common(o, h.Path, h.ObjectSelector)
	if h.OwnNamespace {
		c.namespaceSelector = OwnNamespaceSelector(o.Namespace)
	}
	return admissionregistrationv1.ValidatingWebhook{
		Name: h.Name, ClientConfig: c.clientConfig, Rules: h.Rules,
		FailurePolicy: c.failurePolicy, MatchPolicy: c.matchPolicy,
		NamespaceSelector: c.namespaceSelector, ObjectSelector: c.objectSelector,
		SideEffects: c.sideEffects, TimeoutSeconds: c.timeout, AdmissionReviewVersions: c.versions,
		MatchConditions: h.MatchConditions,
	}
}

type commonFields struct {
	clientConfig      admissionregistrationv1.WebhookClientConfig
	failurePolicy     *admissionregistrationv1.FailurePolicyType
	matchPolicy       *admissionregistrationv1.MatchPolicyType
	namespaceSelector *metav1.LabelSelector
	objectSelector    *metav1.LabelSelector
	sideEffects       *admissionregistrationv1.SideEffectClass
	timeout           *int32
	versions          []string
}

// common holds the fields every olmguard webhook shares. failurePolicy is Ignore everywhere, for
// validation too: when olmguard is down the cluster must behave as stock OLM.
func common(o Options, path string, objectSelector *metav1.LabelSelector) commonFields {
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: o.CABundle}
	if o.URL != "" {
		cc.URL = ptr.To(strings.TrimSuffix(o.URL, "/") + path)
	} else {
		cc.Service = &admissionregistrationv1.ServiceReference{
			Namespace: o.Namespace, Name: o.ServiceName, Path: ptr.To(path), Port: ptr.To(o.ServicePort),
		}
	}
	if objectSelector == nil {
		objectSelector = &metav1.LabelSelector{} // the apiserver's default; keeps Apply idempotent
	}
	return commonFields{
		clientConfig:  cc,
		failurePolicy: ptr.To(admissionregistrationv1.Ignore),
		matchPolicy:   ptr.To(admissionregistrationv1.Equivalent),
		namespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: ExcludedNamespaces(o.Namespace),
		}}},
		objectSelector: objectSelector,
		sideEffects:    ptr.To(admissionregistrationv1.SideEffectClassNone),
		timeout:        ptr.To(o.TimeoutSeconds),
		versions:       []string{"v1"},
	}
}

func labels() map[string]string { return map[string]string{olmguard.NameLabel: olmguard.Name} }

// celString quotes s as a CEL string literal. olmguard's names contain no quote or backslash.
func celString(s string) string { return "'" + s + "'" }

// Apply creates or updates the two configurations Build returns for o. It is idempotent: an
// up-to-date configuration is not written. Labels set by others are kept.
func Apply(ctx context.Context, c client.Client, o Options, hooks []Webhook) error {
	if err := o.Validate(); err != nil {
		return err
	}
	m, v := Build(o, hooks)
	errM := apply(ctx, c, m, func(existing client.Object) bool {
		e := existing.(*admissionregistrationv1.MutatingWebhookConfiguration)
		labelsChanged := mergeLabels(e)
		if !labelsChanged && equality.Semantic.DeepEqual(e.Webhooks, m.Webhooks) {
			return false
		}
		e.Webhooks = m.Webhooks
		return true
	})
	errV := apply(ctx, c, v, func(existing client.Object) bool {
		e := existing.(*admissionregistrationv1.ValidatingWebhookConfiguration)
		labelsChanged := mergeLabels(e)
		if !labelsChanged && equality.Semantic.DeepEqual(e.Webhooks, v.Webhooks) {
			return false
		}
		e.Webhooks = v.Webhooks
		return true
	})
	return errors.Join(errM, errV)
}

// mergeLabels adds olmguard's labels to o and reports whether it changed anything.
func mergeLabels(o client.Object) bool {
	l := o.GetLabels()
	changed := false
	for k, v := range labels() {
		if l[k] != v {
			if l == nil {
				l = map[string]string{}
			}
			l[k] = v
			changed = true
		}
	}
	o.SetLabels(l)
	return changed
}

func apply(ctx context.Context, c client.Client, desired client.Object, update func(existing client.Object) bool) error {
	kind := desired.GetObjectKind().GroupVersionKind().Kind
	// Another replica may create or update the same object concurrently: read again and retry.
	retriable := func(err error) bool { return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) }
	err := retry.OnError(retry.DefaultRetry, retriable, func() error {
		existing := desired.DeepCopyObject().(client.Object)
		err := c.Get(ctx, client.ObjectKeyFromObject(desired), existing)
		if apierrors.IsNotFound(err) {
			return c.Create(ctx, desired.DeepCopyObject().(client.Object), client.FieldOwner(olmguard.FieldManager))
		}
		if err != nil {
			return err
		}
		if !update(existing) {
			return nil
		}
		return c.Update(ctx, existing, client.FieldOwner(olmguard.FieldManager))
	})
	if err != nil {
		return fmt.Errorf("registration: applying %s %s: %w", kind, desired.GetName(), err)
	}
	return nil
}
