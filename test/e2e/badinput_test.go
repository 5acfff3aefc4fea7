package e2e

// Bad input: bodies that are malformed, truncated, oversized (above the apiserver's limit), of the
// wrong kind or version, or with missing fields get a clear error response and never a panic or a
// hang. The running webhook binary gets them straight over HTTPS on every admission path. Every
// answer is an AdmissionReview over HTTP 200: a body that is not a usable review is refused
// (allowed false, result code 400 or 413 and a message saying why); a review whose object a handler
// cannot read is admitted unchanged with a warning saying why (olmguard fails open); a review about
// another kind is allowed with a message. Afterwards the webhook still runs, logged no panic, and
// still answers the apiserver.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

const (
	// badInputTimeout bounds every request: a hang fails the test instead of blocking it.
	badInputTimeout = testenv.Patience
	// reviewBodyReadTimeout is the webhook server's own limit on reading a body (bodyReadTimeout
	// in pkg/webhook): a body that stalls longer is answered with a read timeout.
	reviewBodyReadTimeout = 10 * time.Second
	// reviewBodyLimit is controller-runtime's limit on an admission body: two objects of the
	// apiserver's 3 MiB and the rest of the review.
	reviewBodyLimit = 7 << 20
	// untrustedNS holds the CatalogSource sent to /validate/catalogsources: a namespace the
	// test's webhook does not trust (reviews are sent directly, so it need not exist).
	untrustedNS = "olmguard-untrusted"
	// reviewPadUnit fills big objects; it needs JSON escapes and holds brackets, as descriptions do.
	reviewPadUnit = `An operator's "description" with {braces}, [brackets], a \ backslash and é. `
)

// reviewAnswer is what the webhook should reply.
type reviewAnswer struct {
	allowed bool
	code    int32  // Result.Code of a refusal or a denial
	message string // in Result.Message
	warning string // in a warning
	patch   string // in the JSON patch; none when empty
	uid     bool   // the review was decoded: the answer carries the request's uid
}

// refusedAnswer is controller-runtime's or olmguard's answer to a body that is not a usable review.
func refusedAnswer(code int32, message string) reviewAnswer {
	return reviewAnswer{code: code, message: message}
}

// failedOpenAnswer is olmguard's answer when a handler cannot read the object: admitted unchanged with
// a warning, as the apiserver would otherwise reject OLM's write.
func failedOpenAnswer(text string) reviewAnswer {
	return reviewAnswer{allowed: true, warning: "failed, request admitted unchanged: " + text, uid: true}
}

// unchangedAnswer is an allowed answer with nothing to say.
var unchangedAnswer = reviewAnswer{allowed: true, uid: true}

// reviewTarget is one admission path with the object it is registered for, and its answer to a
// well-formed request about that object.
type reviewTarget struct {
	group, version, kind, resource string
	op                             admissionv1.Operation
	user                           string
	object                         func(pad string) map[string]any
	old                            func(pad string) map[string]any // UPDATE only
	good                           reviewAnswer
}

// review is the AdmissionReview the apiserver would send for tg; pad fills the object (and the old
// object) with that many bytes of text.
func (tg reviewTarget) review(uid, pad string) map[string]any {
	obj := tg.object(pad)
	meta := obj["metadata"].(map[string]any)
	req := map[string]any{
		"uid":             uid,
		"kind":            map[string]any{"group": tg.group, "version": tg.version, "kind": tg.kind},
		"resource":        map[string]any{"group": tg.group, "version": tg.version, "resource": tg.resource},
		"requestKind":     map[string]any{"group": tg.group, "version": tg.version, "kind": tg.kind},
		"requestResource": map[string]any{"group": tg.group, "version": tg.version, "resource": tg.resource},
		"name":            meta["name"],
		"namespace":       meta["namespace"],
		"operation":       string(tg.op),
		"userInfo":        map[string]any{"username": tg.user},
		"object":          obj,
		"dryRun":          false,
	}
	if tg.old != nil {
		req["oldObject"] = tg.old(pad)
	}
	return map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
}

// sized is tg's review grown to about size bytes by padding its objects.
func (tg reviewTarget) sized(t *testing.T, uid string, size int) []byte {
	t.Helper()
	base := len(marshalBody(t, tg.review(uid, "")))
	unit := len(marshalBody(t, reviewPadUnit)) - 2
	objects := 1
	if tg.old != nil {
		objects = 2
	}
	return marshalBody(t, tg.review(uid, strings.Repeat(reviewPadUnit, (size-base)/(objects*unit))))
}

func reviewTargets(ns, catalogNS string, sub *v1alpha1.Subscription) map[string]reviewTarget {
	const ops = "operators.coreos.com"
	plan := func(owners []any) func(string) map[string]any {
		return func(pad string) map[string]any {
			meta := map[string]any{"name": "install-bad", "namespace": ns}
			if owners != nil {
				meta["ownerReferences"] = owners
			}
			return map[string]any{"apiVersion": ops + "/v1alpha1", "kind": "InstallPlan", "metadata": meta,
				"spec": map[string]any{"clusterServiceVersionNames": []any{"probe.v1"}, "approval": "Manual", "approved": false},
				"status": map[string]any{"phase": "Installing", "plan": []any{map[string]any{
					"resolving": "probe.v1", "status": "Unknown", "resource": map[string]any{
						"group": ops, "version": "v1alpha1", "kind": "ClusterServiceVersion", "name": "probe.v1",
						"sourceName": "none", "sourceNamespace": ns, "manifest": pad}}}}}
		}
	}
	subRef := map[string]any{"apiVersion": ops + "/v1alpha1", "kind": "Subscription", "name": sub.Name, "uid": string(sub.UID),
		"controller": false, "blockOwnerDeletion": false}
	csv := func(finalizers []any, deleting bool) func(string) map[string]any {
		return func(pad string) map[string]any {
			meta := map[string]any{"name": "probe.v1", "namespace": ns}
			if finalizers != nil {
				meta["finalizers"] = finalizers
			}
			if deleting {
				meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
			}
			return map[string]any{"apiVersion": ops + "/v1alpha1", "kind": "ClusterServiceVersion", "metadata": meta,
				"spec": map[string]any{"displayName": "Probe", "version": "1.0.0", "description": pad,
					"install": map[string]any{"strategy": "deployment", "spec": map[string]any{"deployments": []any{}}}},
				"status": map[string]any{"phase": "Succeeded", "reason": "InstallSucceeded"}}
		}
	}
	selfReplacing := func(pad string) map[string]any {
		o := csv(nil, false)(pad)
		o["spec"].(map[string]any)["replaces"] = "probe.v1"
		return o
	}
	const hash = "3f7a9c0b1d2e4f5061728394a5b6c7d8e9f00112233445566778899aabbcc"
	job := func(pad string) map[string]any {
		return map[string]any{"apiVersion": "batch/v1", "kind": "Job",
			"metadata": map[string]any{"name": hash, "namespace": catalogNS,
				"labels":          map[string]any{"operatorframework.io/bundle-unpack-ref": hash, "olm.managed": "true"},
				"ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": hash, "uid": "0b6f3c1e-0000-4000-8000-000000000001"}}},
			"spec": map[string]any{"backoffLimit": 3, "template": map[string]any{"spec": map[string]any{"restartPolicy": "Never",
				"containers": []any{map[string]any{"name": "extract", "image": "quay.io/example/bundle:v1",
					"env": []any{map[string]any{"name": "BUNDLE_NOTES", "value": pad}}}}}}}}
	}
	// OLM's ServiceAccount step (#3607): OLM's update drops the user's role annotation.
	serviceAccount := func(annotations map[string]any) func(string) map[string]any {
		return func(pad string) map[string]any {
			a := map[string]any{"notes": pad}
			for k, v := range annotations {
				a[k] = v
			}
			// Owned by a CSV, as OLM's step writes it (serviceaccounts.StepWrite).
			owner := map[string]any{"apiVersion": ops + "/v1alpha1", "kind": "ClusterServiceVersion", "name": "probe.v1",
				"uid": "00000000-0000-0000-0000-000000003607"}
			return map[string]any{"apiVersion": "v1", "kind": "ServiceAccount",
				"metadata": map[string]any{"name": "probe-operator", "namespace": ns, "labels": map[string]any{"olm.managed": "true"},
					"annotations": a, "ownerReferences": []any{owner}}}
		}
	}
	subscription := func(pad string) map[string]any {
		return map[string]any{"apiVersion": ops + "/v1alpha1", "kind": "Subscription",
			"metadata": map[string]any{"name": "probe-again", "namespace": ns},
			"spec": map[string]any{"source": "none", "sourceNamespace": ns, "name": "probe",
				"config": map[string]any{"env": []any{map[string]any{"name": "NOTES", "value": pad}}}}}
	}
	operatorGroup := func(pad string) map[string]any {
		return map[string]any{"apiVersion": ops + "/v1", "kind": "OperatorGroup",
			"metadata": map[string]any{"name": "probe-og", "namespace": ns, "annotations": map[string]any{"notes": pad}},
			"spec":     map[string]any{"targetNamespaces": []any{ns, "olmguard-no-such-namespace"}}}
	}
	// A catalog in a namespace the test's webhook does not trust (--trusted-catalog-namespaces).
	catalogSource := func(pad string) map[string]any {
		return map[string]any{"apiVersion": ops + "/v1alpha1", "kind": "CatalogSource",
			"metadata": map[string]any{"name": "probe-catalog", "namespace": untrustedNS, "annotations": map[string]any{"notes": pad}},
			"spec":     map[string]any{"sourceType": "grpc", "image": "quay.io/example/catalog:v1"}}
	}
	// The reachability probe's ConfigMap, not a dry run: the webhook marks only dry runs in
	// olmguard's namespace, so a well-formed review is allowed unchanged.
	probeConfigMap := func(pad string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "probe-configmap", "namespace": ns,
				"labels": map[string]any{olmguard.WebhookProbeLabel: "abc-123"}, "annotations": map[string]any{"notes": pad}}}
	}
	const user = "system:serviceaccount:olmguard-probe:someone"
	return map[string]reviewTarget{
		olmguard.MutateWebhookProbePath: {group: "", version: "v1", kind: "ConfigMap", resource: "configmaps",
			op: admissionv1.Create, user: user, object: probeConfigMap,
			good: reviewAnswer{allowed: true, uid: true}},
		olmguard.MutateInstallPlansPath: {group: ops, version: "v1alpha1", kind: "InstallPlan", resource: "installplans",
			op: admissionv1.Create, user: user, object: plan(nil),
			good: reviewAnswer{allowed: true, message: "added Subscription ownerReferences", patch: string(sub.UID), uid: true}},
		olmguard.MutateClusterServiceVersionsPath: {group: ops, version: "v1alpha1", kind: "ClusterServiceVersion", resource: "clusterserviceversions",
			op: admissionv1.Create, user: user, object: csv(nil, false),
			good: reviewAnswer{allowed: true, message: "added the olmguard.io/cleanup finalizer", patch: olmguard.CleanupFinalizer, uid: true}},
		olmguard.MutateJobsPath: {group: "batch", version: "v1", kind: "Job", resource: "jobs",
			op: admissionv1.Create, user: user, object: job,
			good: reviewAnswer{allowed: true, message: "namespace-scoped unpack Job name", patch: `"/metadata/name","value":"ou-`, uid: true}},
		olmguard.MutateServiceAccountsPath: {group: "", version: "v1", kind: "ServiceAccount", resource: "serviceaccounts",
			op: admissionv1.Update, user: olm.ServiceAccountUser("olm"), object: serviceAccount(nil),
			old:  serviceAccount(map[string]any{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/probe"}),
			good: reviewAnswer{allowed: true, message: "OLM issue #3607", patch: "role-arn", uid: true}},
		olmguard.ValidateSubscriptionsPath: {group: ops, version: "v1alpha1", kind: "Subscription", resource: "subscriptions",
			op: admissionv1.Create, user: user, object: subscription,
			good: reviewAnswer{allowed: true, warning: `package "probe" already has Subscription`, uid: true}},
		olmguard.ValidateOperatorGroupsPath: {group: ops, version: "v1", kind: "OperatorGroup", resource: "operatorgroups",
			op: admissionv1.Create, user: user, object: operatorGroup,
			good: reviewAnswer{allowed: true, warning: "targets namespaces that do not exist: olmguard-no-such-namespace;", uid: true}},
		olmguard.ValidateCatalogSourcesPath: {group: ops, version: "v1alpha1", kind: "CatalogSource", resource: "catalogsources",
			op: admissionv1.Create, user: user, object: catalogSource,
			good: reviewAnswer{code: http.StatusForbidden, message: "CatalogSource " + untrustedNS + "/probe-catalog is not trusted to serve operators", uid: true}},
		olmguard.ValidateInstallPlansPath: {group: ops, version: "v1alpha1", kind: "InstallPlan", resource: "installplans",
			op: admissionv1.Update, user: user, object: plan(nil), old: plan([]any{subRef}),
			good: reviewAnswer{code: http.StatusForbidden, message: "must keep the ownerReferences of live Subscriptions " + sub.Name, uid: true}},
		olmguard.ValidateClusterServiceVersionsPath: {group: ops, version: "v1alpha1", kind: "ClusterServiceVersion", resource: "clusterserviceversions",
			op: admissionv1.Update, user: user, object: csv([]any{}, true), old: csv([]any{olmguard.CleanupFinalizer}, true),
			good: reviewAnswer{code: http.StatusForbidden, message: user + " may not remove " + olmguard.CleanupFinalizer, uid: true}},
		olmguard.ValidateCSVReplacesPath: {group: ops, version: "v1alpha1", kind: "ClusterServiceVersion", resource: "clusterserviceversions",
			op: admissionv1.Create, user: user, object: selfReplacing,
			good: reviewAnswer{allowed: true, warning: "CSV probe.v1 in namespace " + ns + " replaces itself", uid: true}},
	}
}

// badCase is one body sent to every path.
type badCase struct {
	name        string
	contentType string // "" sends application/json, "-" none
	// body builds what is sent; edit, when body is nil, changes the well-formed review instead.
	body func(t *testing.T, tg reviewTarget, uid string) []byte
	edit func(tg reviewTarget, review, req map[string]any)
	// shortBy > 0 announces that many bytes more than the body holds, then ends the stream.
	shortBy int
	want    func(path string, tg reviewTarget) reviewAnswer
}

func alwaysAnswer(a reviewAnswer) func(string, reviewTarget) reviewAnswer {
	return func(string, reviewTarget) reviewAnswer { return a }
}

func badCases() []badCase {
	good := func(_ string, tg reviewTarget) reviewAnswer { return tg.good }
	decoding := func(what string) func(string, reviewTarget) reviewAnswer {
		return func(_ string, tg reviewTarget) reviewAnswer { return failedOpenAnswer("decoding " + tg.kind + what) }
	}
	// replaceObject puts v where the object is (and the old object, for updates).
	replaceObject := func(v any) func(reviewTarget, map[string]any, map[string]any) {
		return func(tg reviewTarget, _, req map[string]any) {
			req["object"] = v
			if tg.old != nil {
				req["oldObject"] = v
			}
		}
	}
	return []badCase{
		{name: "well-formed", want: good},
		{name: "just under the size limit", body: func(t *testing.T, tg reviewTarget, uid string) []byte {
			b := tg.sized(t, uid, reviewBodyLimit-64<<10)
			if len(b) < reviewBodyLimit-256<<10 || len(b) >= reviewBodyLimit {
				t.Fatalf("the big body has %d bytes, want just under %d", len(b), reviewBodyLimit)
			}
			return b
		}, want: good},
		{name: "above the size limit", body: func(t *testing.T, tg reviewTarget, uid string) []byte { return tg.sized(t, uid, 8<<20) },
			want: alwaysAnswer(refusedAnswer(http.StatusRequestEntityTooLarge, "request entity is too large; limit is 7340032 bytes"))},
		{name: "empty", body: func(*testing.T, reviewTarget, string) []byte { return nil },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "request body is empty"))},
		{name: "not JSON", body: func(*testing.T, reviewTarget, string) []byte { return []byte("this is not an AdmissionReview") },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "malformed AdmissionReview: malformed object: not a JSON object"))},
		{name: "truncated", body: func(t *testing.T, tg reviewTarget, uid string) []byte {
			b := marshalBody(t, tg.review(uid, ""))
			return b[:len(b)/2]
		}, want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "malformed AdmissionReview: malformed object at offset"))},
		{name: "shorter than its Content-Length", shortBy: 1000, body: func(t *testing.T, tg reviewTarget, uid string) []byte {
			return marshalBody(t, tg.review(uid, ""))
		}, want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "unexpected EOF"))},
		{name: "YAML", body: func(t *testing.T, tg reviewTarget, uid string) []byte {
			return []byte("apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nrequest:\n  uid: " + uid + "\n  operation: CREATE\n")
		}, want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "malformed AdmissionReview: malformed object: not a JSON object"))},
		{name: "nested too deeply", body: func(t *testing.T, tg reviewTarget, uid string) []byte {
			r := tg.review(uid, "")
			replaceObject("NESTED")(tg, r, r["request"].(map[string]any))
			deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
			return bytes.ReplaceAll(marshalBody(t, r), []byte(`"NESTED"`), []byte(deep))
		}, want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "nested too deeply"))},
		{name: "Content-Type text/plain", contentType: "text/plain", want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "contentType=text/plain, expected application/json"))},
		{name: "no Content-Type", contentType: "-", want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "contentType=, expected application/json"))},
		{name: "AdmissionReview v2", edit: func(_ reviewTarget, r, _ map[string]any) { r["apiVersion"] = "admission.k8s.io/v2" },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, `malformed AdmissionReview: apiVersion "admission.k8s.io/v2" and kind "AdmissionReview"`))},
		{name: "kind Pod", edit: func(_ reviewTarget, r, _ map[string]any) { r["kind"] = "Pod" },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, `malformed AdmissionReview: apiVersion "admission.k8s.io/v1" and kind "Pod"`))},
		{name: "no apiVersion and kind", edit: func(_ reviewTarget, r, _ map[string]any) { delete(r, "apiVersion"); delete(r, "kind") },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, `malformed AdmissionReview: apiVersion "" and kind ""`))},
		{name: "no request", edit: func(_ reviewTarget, r, _ map[string]any) { delete(r, "request") },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "malformed AdmissionReview: no request"))},
		{name: "request is a string", edit: func(_ reviewTarget, r, _ map[string]any) { r["request"] = "CREATE" },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "malformed AdmissionReview: request: malformed object: not a JSON object"))},
		{name: "request without uid and operation", edit: func(_ reviewTarget, _, req map[string]any) { delete(req, "uid"); delete(req, "operation") },
			want: alwaysAnswer(refusedAnswer(http.StatusBadRequest, "malformed AdmissionReview: request has no uid, operation"))},
		{name: "object of another kind", edit: func(tg reviewTarget, _, req map[string]any) {
			pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "olmguard-probe"},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "busybox"}}}}
			req["kind"] = map[string]any{"group": "", "version": "v1", "kind": "Pod"}
			req["resource"] = map[string]any{"group": "", "version": "v1", "resource": "pods"}
			replaceObject(pod)(tg, nil, req)
		}, want: func(_ string, tg reviewTarget) reviewAnswer {
			article := "a "
			if strings.ContainsRune("AEIOU", rune(tg.kind[0])) {
				article = "an "
			}
			return reviewAnswer{allowed: true, message: "not " + article + tg.kind, uid: true}
		}},
		{name: "no object", edit: func(_ reviewTarget, _, req map[string]any) { delete(req, "object") }, want: decoding("")},
		{name: "object without metadata", edit: func(_ reviewTarget, _, req map[string]any) { delete(req["object"].(map[string]any), "metadata") },
			want: decoding(": object has no metadata")},
		{name: "metadata is a string", edit: func(_ reviewTarget, _, req map[string]any) { req["object"].(map[string]any)["metadata"] = "probe" },
			want: decoding(": malformed object")},
		{name: "object is an array", edit: replaceObject([]any{map[string]any{"metadata": map[string]any{"name": "a"}}}),
			want: decoding(": malformed object")},
		{name: "object is a string", edit: replaceObject("probe"), want: decoding(": malformed object")},
		// Only the Job handler reads spec (for its TTL) and the replaces-cycle guard spec.replaces; the others answer as to a whole object.
		{name: "object without spec", edit: func(_ reviewTarget, _, req map[string]any) { delete(req["object"].(map[string]any), "spec") },
			want: func(path string, tg reviewTarget) reviewAnswer {
				switch path {
				case olmguard.MutateJobsPath:
					return failedOpenAnswer("decoding Job: object has no spec")
				case olmguard.ValidateSubscriptionsPath:
					// no package: nothing to compare; olmguard-probe has no OperatorGroup
					return reviewAnswer{allowed: true, warning: "namespace olmguard-probe has no OperatorGroup", uid: true}
				case olmguard.ValidateOperatorGroupsPath:
					return unchangedAnswer // no target namespaces to look up
				case olmguard.ValidateCSVReplacesPath:
					return unchangedAnswer // no spec.replaces: nothing to follow
				}
				return tg.good
			}},
		// An update without its old object: handlers that compare with it say so.
		{name: "update without oldObject", edit: func(_ reviewTarget, _, req map[string]any) { req["operation"] = "UPDATE"; delete(req, "oldObject") },
			want: func(path string, tg reviewTarget) reviewAnswer {
				switch path {
				case olmguard.MutateClusterServiceVersionsPath:
					return tg.good // the finalizer is added on updates too; the old CSV is not read
				case olmguard.MutateJobsPath:
					return unchangedAnswer // only creations are renamed
				case olmguard.MutateWebhookProbePath:
					return unchangedAnswer // only creations (dry runs) are marked
				}
				return failedOpenAnswer("decoding old " + tg.kind + ": empty object")
			}},
	}
}

func TestBadInputAnsweredClearly(t *testing.T) {
	c := cluster.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Catalog trust enforced, trusting the namespaces of the probe Subscription's catalog and of
	// the test's CatalogSource, so that its path judges a catalog (in untrustedNS) too.
	p := startWebhook(t, c, "--policy-catalog-trust=enforce", "--trusted-catalog-namespaces=olmguard-probe,olmguard-badinput")
	// The probe Subscription in olmguard-probe gives the well-formed requests something to act on.
	waitWebhookActive(t, ctx, c)
	sub := &v1alpha1.Subscription{}
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: "olmguard-probe", Name: "probe"}, sub); err != nil {
		t.Fatal(err)
	}
	const catalogNS = "olmguard-badinput"
	if err := c.CreateNamespace(ctx, catalogNS); err != nil {
		t.Fatal(err)
	}
	catalog := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Name: "catalog", Namespace: catalogNS},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Image: "quay.io/example/catalog:v1"}}
	if err := c.Client.Create(ctx, catalog); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Client.Delete(context.Background(), catalog); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
	urls, ca := registeredEndpoints(t, ctx, c)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		t.Fatalf("the registered caBundle holds no certificate: %q", ca)
	}
	tlsConfig := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	hc := &http.Client{Timeout: badInputTimeout, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer hc.CloseIdleConnections()

	tgs := reviewTargets("olmguard-probe", catalogNS, sub)
	// The Job webhook renames unpack Jobs only where a CatalogSource exists, as read from the
	// apiserver's watch cache: wait until it sees the one just created.
	jobs := tgs[olmguard.MutateJobsPath]
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(context.Context) (bool, error) {
		_, raw := postReview(t, hc, urls[olmguard.MutateJobsPath], "application/json", marshalBody(t, jobs.review("badinput-catalog", "")))
		return bytes.Contains(raw, []byte(`"patch"`)), nil
	}); err != nil {
		t.Fatalf("the Job webhook never saw the CatalogSource in %s: %v", catalogNS, err)
	}
	n := 0
	start := time.Now()
	for _, path := range admit.Paths(setup.DefaultWebhook().Admission()) {
		tg, ok := tgs[path]
		if !ok {
			t.Fatalf("admission path %s has no target in this test", path)
		}
		for _, bc := range badCases() {
			t.Run(strings.TrimPrefix(path, "/")+"/"+bc.name, func(t *testing.T) {
				n++
				uid := fmt.Sprintf("badinput-%04d", n)
				var body []byte
				if bc.body != nil {
					body = bc.body(t, tg, uid)
				} else {
					r := tg.review(uid, "")
					if bc.edit != nil {
						bc.edit(tg, r, r["request"].(map[string]any))
					}
					body = marshalBody(t, r)
				}
				ct := "application/json"
				switch bc.contentType {
				case "":
				case "-":
					ct = ""
				default:
					ct = bc.contentType
				}
				var status int
				var raw []byte
				took := time.Now()
				want := bc.want(path, tg)
				if bc.shortBy > 0 {
					status, raw = postStalledReview(t, urls[path], tlsConfig, body, bc.shortBy, func() {
						// While that body stalls, the server answers others.
						s, r := postReview(t, hc, urls[path], "application/json", marshalBody(t, tg.review(uid+"-meanwhile", "")))
						checkReviewAnswer(t, s, r, tg.good, uid+"-meanwhile")
					})
					if bytes.Contains(raw, []byte("i/o timeout")) {
						// The answer meanwhile outlasted the server's limit on reading a body (a busy
						// machine): its guard ended the read before the stream did, with its own
						// clear refusal; never before the limit.
						if stalled := time.Since(took); stalled < reviewBodyReadTimeout {
							t.Errorf("a body read timed out %s after the request began, before the server's %s limit", stalled, reviewBodyReadTimeout)
						}
						want = refusedAnswer(http.StatusBadRequest, "reading the request body")
					}
				} else {
					status, raw = postReview(t, hc, urls[path], ct, body)
				}
				t.Logf("%d-byte body: HTTP %d in %v: %.300s", len(body), status, time.Since(took).Round(time.Millisecond), raw)
				checkReviewAnswer(t, status, raw, want, uid)
			})
		}
	}
	t.Logf("%d requests answered in %v", n, time.Since(start).Round(time.Millisecond))

	if p.Exited() {
		t.Fatal("the webhook exited")
	}
	log, err := os.ReadFile(p.Log)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.Index(bytes.ToLower(log), []byte("panic")); i >= 0 {
		t.Errorf("the webhook's log mentions a panic: %.500s", log[max(0, i-200):])
	}
	if !bytes.Contains(log, []byte("refusing an admission request")) {
		t.Error("the webhook's log does not record the malformed reviews it refused")
	}
	// It still serves the apiserver.
	waitWebhookActive(t, ctx, c)
}

// registeredEndpoints returns the URL of every admission path and the CA bundle, as registered.
func registeredEndpoints(t *testing.T, ctx context.Context, c *cluster.Cluster) (map[string]string, []byte) {
	t.Helper()
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.MutatingWebhookConfigurationName}, m); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: olmguard.ValidatingWebhookConfigurationName}, v); err != nil {
		t.Fatal(err)
	}
	var configs []admissionregistrationv1.WebhookClientConfig
	for _, w := range m.Webhooks {
		configs = append(configs, w.ClientConfig)
	}
	for _, w := range v.Webhooks {
		configs = append(configs, w.ClientConfig)
	}
	urls := map[string]string{}
	var ca []byte
	for _, cc := range configs {
		if cc.URL == nil {
			t.Fatalf("clientConfig %+v has no URL", cc)
		}
		u, err := url.Parse(*cc.URL)
		if err != nil {
			t.Fatal(err)
		}
		urls[u.Path] = *cc.URL
		ca = cc.CABundle
	}
	for _, path := range admit.Paths(setup.DefaultWebhook().Admission()) {
		if urls[path] == "" {
			t.Fatalf("no registered webhook calls %s: %v", path, urls)
		}
	}
	return urls, ca
}

// postReview sends body and returns the HTTP status and body of the answer.
func postReview(t *testing.T, hc *http.Client, u, contentType string, body []byte) (int, []byte) {
	t.Helper()
	var r io.Reader = http.NoBody
	if len(body) > 0 {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(http.MethodPost, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	return readAnswer(t, resp, err)
}

// readAnswer returns the status and body of an answer, failing the test when none came.
func readAnswer(t *testing.T, resp *http.Response, err error) (int, []byte) {
	t.Helper()
	if err != nil {
		t.Fatalf("no answer within %v: %v", badInputTimeout, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return resp.StatusCode, raw
}

// postStalledReview announces shortBy bytes more than body holds, sends body, calls meanwhile, then ends
// the stream (TLS close_notify) and reads the answer.
func postStalledReview(t *testing.T, u string, cfg *tls.Config, body []byte, shortBy int, meanwhile func()) (int, []byte) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", pu.Host, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(badInputTimeout)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", pu.Path, pu.Host, len(body)+shortBy)
	if _, err := conn.Write(body); err != nil {
		t.Fatal(err)
	}
	meanwhile()
	if err := conn.CloseWrite(); err != nil {
		// The server may have answered and closed already, past its limit on reading a body.
		t.Logf("ending the stream: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	return readAnswer(t, resp, err)
}

// checkReviewAnswer compares an HTTP answer with what the webhook should reply.
func checkReviewAnswer(t *testing.T, status int, raw []byte, want reviewAnswer, uid string) {
	t.Helper()
	if status < 200 || status >= 500 {
		t.Errorf("HTTP status %d, want 2xx or 4xx", status)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &ar); err != nil || ar.Response == nil {
		t.Fatalf("the answer %.300q is not an AdmissionReview with a response: %v", raw, err)
	}
	r := ar.Response
	if want.uid {
		if r.UID != types.UID(uid) || ar.APIVersion != "admission.k8s.io/v1" || ar.Kind != "AdmissionReview" {
			t.Errorf("answer %s/%s uid %q, want an admission.k8s.io/v1 AdmissionReview for uid %q", ar.APIVersion, ar.Kind, r.UID, uid)
		}
	} else if r.UID != "" {
		t.Errorf("uid %q in the answer to a body that was not decoded", r.UID)
	}
	if r.Result != nil && r.Result.Code >= 500 {
		t.Errorf("result code %d: a server error", r.Result.Code)
	}
	if r.Allowed != want.allowed {
		t.Errorf("allowed = %v, want %v (result %+v, warnings %q)", r.Allowed, want.allowed, r.Result, r.Warnings)
	}
	if !want.allowed && (r.Result == nil || r.Result.Code != want.code) {
		t.Errorf("result %+v, want code %d", r.Result, want.code)
	}
	message := ""
	if r.Result != nil {
		message = r.Result.Message
	}
	if !want.allowed && strings.TrimSpace(message) == "" {
		t.Error("a refusal without a message")
	}
	if !strings.Contains(message, want.message) {
		t.Errorf("message %q, want it to contain %q", message, want.message)
	}
	if want.warning == "" && len(r.Warnings) > 0 {
		t.Errorf("warnings %q, want none", r.Warnings)
	}
	if want.warning != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), want.warning) {
		t.Errorf("warnings %q, want one containing %q", r.Warnings, want.warning)
	}
	switch {
	case want.patch == "" && len(r.Patch) > 0:
		t.Errorf("patch %s, want none", r.Patch)
	case want.patch != "" && (r.PatchType == nil || *r.PatchType != admissionv1.PatchTypeJSONPatch || !strings.Contains(string(r.Patch), want.patch)):
		t.Errorf("patch %s (type %v), want a JSON patch containing %q", r.Patch, r.PatchType, want.patch)
	}
}

func marshalBody(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
