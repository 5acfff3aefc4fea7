package validate

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// withStatus gives a Subscription the status OLM writes: its newest plan and that plan's
// generation, and the CSV installed and the one it resolved to.
func withStatus(s v1alpha1.Subscription, plan string, gen int, installed, current string) v1alpha1.Subscription {
	if plan != "" {
		s.Status.InstallPlanRef = &corev1.ObjectReference{Kind: "InstallPlan", Namespace: s.Namespace, Name: plan}
		s.Status.InstallPlanGeneration = gen
	}
	s.Status.InstalledCSV, s.Status.CurrentCSV = installed, current
	return s
}

func TestApprovalPolicies(t *testing.T) {
	auto := withStatus(sub("a", "etcd", v1alpha1.ApprovalAutomatic), "install-2", 2, "etcd.v1", "etcd.v2")
	manual := withStatus(sub("b", "redis", v1alpha1.ApprovalManual), "install-2", 2, "redis.v1", "redis.v2")
	manualUpToDate := withStatus(sub("b", "redis", v1alpha1.ApprovalManual), "install-2", 2, "redis.v1", "redis.v1")
	moved := withStatus(sub("a", "etcd", v1alpha1.ApprovalAutomatic), "install-3", 3, "etcd.v1", "etcd.v3")
	autoUpToDate := withStatus(sub("a", "etcd", v1alpha1.ApprovalAutomatic), "install-1", 1, "etcd.v1", "etcd.v1")
	manualAtOwnPlan := withStatus(sub("b", "redis", v1alpha1.ApprovalManual), "install-1", 1, "redis.v1", "redis.v2")
	deleting := manual
	deleting.DeletionTimestamp = &metav1.Time{}
	owners := []metav1.OwnerReference{ref("a", "uid-a"), ref("b", "uid-b")}
	for _, tc := range []struct {
		name string
		mode Mode
		a    Approval
		subs []v1alpha1.Subscription
		want []string // policy: message fragment
	}{
		{"the newest plan of one Automatic Subscription", Warn,
			Approval{"install-2", owners[:1], []string{"etcd.v2"}, 2}, []v1alpha1.Subscription{auto}, nil},
		{"the newest plan of one Manual Subscription: asked for", Warn,
			Approval{"install-2", owners[1:], []string{"redis.v2"}, 2}, []v1alpha1.Subscription{manual}, nil},
		{"mixed plan upgrading the Manual one", Warn,
			Approval{"install-2", owners, []string{"etcd.v2", "redis.v2"}, 2}, []v1alpha1.Subscription{auto, manual},
			[]string{"unrequested-upgrade: InstallPlan install-2 installs etcd.v2 (Automatic Subscription a) and also upgrades Subscription b from redis.v1 to redis.v2, whose approval is Manual"}},
		{"mixed plan, the Manual Subscription still at its own older upgrade plan (as OLM v0.46 leaves it)", Warn,
			Approval{"install-2", owners, []string{"etcd.v2", "redis.v2"}, 2}, []v1alpha1.Subscription{auto, manualAtOwnPlan},
			[]string{"unrequested-upgrade: also upgrades Subscription b from redis.v1 to redis.v2"}},
		{"the Manual Subscription's own plan, older than the mixed one: not stale", Enforce,
			Approval{"install-1", owners[1:], []string{"redis.v2"}, 1}, []v1alpha1.Subscription{manualAtOwnPlan}, nil},
		{"the Manual Subscription's own upgrade plan, owned by an up-to-date Automatic one as OLM owns every plan", Enforce,
			Approval{"install-2", owners, []string{"redis.v2"}, 2}, []v1alpha1.Subscription{autoUpToDate, manual}, nil},
		{"mixed plan that leaves the Manual one alone", Warn,
			Approval{"install-2", owners, []string{"etcd.v2"}, 2}, []v1alpha1.Subscription{auto, manualUpToDate}, nil},
		{"mixed plan, the Manual Subscription being deleted", Warn,
			Approval{"install-2", owners, []string{"etcd.v2", "redis.v2"}, 2}, []v1alpha1.Subscription{auto, deleting}, nil},
		{"a plan the Subscription has moved on from", Enforce,
			Approval{"install-2", owners[:1], []string{"etcd.v2"}, 2}, []v1alpha1.Subscription{moved},
			[]string{"stale-approval: InstallPlan install-2 is not the newest plan of Subscription a (its newest plan is install-3)"}},
		{"a plan of another namespace's Subscription of the same name (UID differs)", Enforce,
			Approval{"install-2", []metav1.OwnerReference{ref("a", "uid-other")}, nil, 2}, []v1alpha1.Subscription{moved}, nil},
		{"off", Off,
			Approval{"install-2", owners, []string{"etcd.v2", "redis.v2"}, 2}, []v1alpha1.Subscription{moved, manual}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ApprovalPolicies(Policies{Approval: tc.mode}, tc.a, tc.subs)
			if len(got) != len(tc.want) {
				t.Fatalf("got %+v, want %d violations", got, len(tc.want))
			}
			for i, v := range got {
				policy, msg, _ := strings.Cut(tc.want[i], ": ")
				if v.Policy != policy || v.Mode != tc.mode || !strings.Contains(v.Message, msg) {
					t.Errorf("violation %d = %+v, want %s in %s containing %q", i, v, policy, tc.mode, msg)
				}
			}
		})
	}
}

func TestInstallPlanHandlerApproval(t *testing.T) {
	auto := withStatus(sub("a", "etcd", v1alpha1.ApprovalAutomatic), "install-2", 2, "etcd.v1", "etcd.v2")
	manual := withStatus(sub("b", "redis", v1alpha1.ApprovalManual), "install-2", 2, "redis.v1", "redis.v2")
	reader := fake.NewClientBuilder().WithScheme(scheme(t)).WithObjects(&auto, &manual).Build()
	plan := func(approved bool, status any) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"name": "install-2", "namespace": "ns", "ownerReferences": []metav1.OwnerReference{ref("a", "uid-a"), ref("b", "uid-b")}},
			"spec":     map[string]any{"approved": approved, "approval": "Manual", "clusterServiceVersionNames": []string{"etcd.v2", "redis.v2"}},
			"status":   status,
		}
	}
	for _, tc := range []struct {
		name          string
		mode          Mode
		obj, old      map[string]any
		allowed, warn bool
	}{
		{"approval warned", Warn, plan(true, nil), plan(false, nil), true, true},
		{"approval denied", Enforce, plan(true, nil), plan(false, nil), false, false},
		{"status update of an approved plan", Enforce, plan(true, map[string]any{"phase": "Complete"}), plan(true, nil), true, false},
		{"unapproved plan updated", Enforce, plan(false, map[string]any{"phase": "RequiresApproval"}), plan(false, nil), true, false},
		{"off", Off, plan(true, nil), plan(false, nil), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicies()
			p.Approval = tc.mode
			h := served(&InstallPlanHandler{Subscriptions: admit.LiveSubscriptions{Reader: reader}, Policies: p})
			r := h.Handle(context.Background(), request(t, "InstallPlan", admissionv1.Update, tc.obj, tc.old))
			if r.Allowed != tc.allowed || (len(r.Warnings) > 0) != tc.warn {
				t.Errorf("allowed %v, warnings %q (%+v); want allowed %v, a warning %v", r.Allowed, r.Warnings, r.Result, tc.allowed, tc.warn)
			}
			if !r.Allowed && !strings.Contains(r.Result.Message, "also upgrades Subscription b from redis.v1 to redis.v2") {
				t.Errorf("denial %q does not name the Manual Subscription and its upgrade", r.Result.Message)
			}
		})
	}
}
