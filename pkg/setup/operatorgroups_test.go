package setup_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/pkg/admit"
	"github.com/olmguard/olmguard/pkg/metrics"
	olmv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/pkg/olmguard"
	"github.com/olmguard/olmguard/pkg/setup"
	"github.com/olmguard/olmguard/pkg/validate"
	"github.com/olmguard/olmguard/test/builders"
	"github.com/olmguard/olmguard/test/testenv"
)

// Namespaces whose OperatorGroups and Subscriptions the in-process webhook judges with the
// OperatorGroup guard in another mode than the default (warn), or with its lookups failing.
const (
	ogEnforceNamespace  = "og-enforce"
	ogOffNamespace      = "og-off"
	ogFailOpenNamespace = "og-fail-open"
)

// withOperatorGroupModes serves the requests of the namespaces above from the production
// handler factory of path built with other policies (or, in ogFailOpenNamespace, from the
// production handlers whose apiserver lookups cannot finish in time); every other namespace from
// production itself.
func withOperatorGroupModes(path string, production admit.HandlerFactory) admit.HandlerFactory {
	factory := func(m validate.Mode) admit.HandlerFactory {
		w := setup.DefaultWebhook()
		w.Policies.OperatorGroups = m
		for _, e := range w.Admission() {
			if e.Path == path {
				return e.Handler
			}
		}
		panic("no admission path " + path)
	}
	return func(mgr manager.Manager) (admit.Decider, error) {
		routes := byNamespace{}
		for ns, f := range map[string]admit.HandlerFactory{ogEnforceNamespace: factory(validate.Enforce), ogOffNamespace: factory(validate.Off), "": production} {
			d, err := f(mgr)
			if err != nil {
				return nil, err
			}
			routes[ns] = d
		}
		// Lookups through the apiserver with a timeout they cannot meet.
		late := mgr.GetAPIReader()
		p := setup.DefaultWebhook().Policies
		p.OperatorGroups = validate.Enforce
		switch path {
		case olmguard.ValidateOperatorGroupsPath:
			routes[ogFailOpenNamespace] = &validate.OperatorGroupHandler{OperatorGroups: admit.LiveOperatorGroups{Reader: late, Timeout: time.Nanosecond},
				Namespaces: admit.LiveNamespaces{Reader: late, Timeout: time.Nanosecond}, Policies: p}
		case olmguard.ValidateSubscriptionsPath:
			routes[ogFailOpenNamespace] = &validate.SubscriptionHandler{Subscriptions: admit.LiveSubscriptions{Reader: late},
				OperatorGroups: admit.LiveOperatorGroups{Reader: late, Timeout: time.Nanosecond}, Policies: p}
		}
		return routes, nil
	}
}

func newOperatorGroup(ns, name string, targets ...string) *olmv1.OperatorGroup {
	return &olmv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: olmv1.OperatorGroupSpec{TargetNamespaces: targets}}
}

// The OperatorGroup guard through a real kube-apiserver: a second OperatorGroup is denied in
// enforce, warned about in warn (the default) and left alone when off; a missing target
// namespace and a Subscription where no OperatorGroup is are warnings in every mode but off;
// failed lookups admit unchanged, warned and counted.
func TestOperatorGroupGuard(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	c, w := testenv.WarningClient(t, env.Config, env.Scheme)
	const second = "already has OperatorGroup first"
	const noGroup = "has no OperatorGroup, so OLM will not install Subscription"

	for _, tc := range []struct {
		ns                 string
		denied             bool
		warnSecond, others bool
	}{
		{testenv.Namespace(t, env.Client, "og-warn"), false, true, true},
		{testenv.Namespace(t, env.Client, ogEnforceNamespace), true, false, true},
		{testenv.Namespace(t, env.Client, ogOffNamespace), false, false, false},
	} {
		t.Run(tc.ns, func(t *testing.T) {
			w.Take()
			if err := c.Create(ctx, builders.Subscription(tc.ns, "early", "etcd", v1alpha1.ApprovalAutomatic)); err != nil {
				t.Fatalf("a Subscription is never denied for want of an OperatorGroup: %v", err)
			}
			if got := w.Take(); strings.Contains(got, noGroup) != tc.others || (tc.others && !strings.Contains(got, "create one OperatorGroup in namespace "+tc.ns)) {
				t.Errorf("Subscription without an OperatorGroup: warnings %q, want the warning with its fix: %v", got, tc.others)
			}
			if err := c.Create(ctx, newOperatorGroup(tc.ns, "first", tc.ns)); err != nil {
				t.Fatal(err)
			}
			if got := w.Take(); got != "" {
				t.Errorf("first OperatorGroup: warnings %q, want none", got)
			}
			if err := c.Create(ctx, builders.Subscription(tc.ns, "late", "redis", v1alpha1.ApprovalAutomatic)); err != nil {
				t.Fatal(err)
			}
			if got := w.Take(); strings.Contains(got, noGroup) {
				t.Errorf("Subscription beside an OperatorGroup: warnings %q", got)
			}

			err := c.Create(ctx, newOperatorGroup(tc.ns, "second"))
			switch {
			case tc.denied && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), second) || !strings.Contains(err.Error(), "TooManyOperatorGroups")):
				t.Errorf("second OperatorGroup in enforce: %v, want a denial naming OperatorGroup first", err)
			case !tc.denied && err != nil:
				t.Errorf("second OperatorGroup: %v, want it admitted", err)
			}
			if got := w.Take(); strings.Contains(got, second) != tc.warnSecond {
				t.Errorf("second OperatorGroup: warnings %q, want the warning: %v", got, tc.warnSecond)
			}

			og := &olmv1.OperatorGroup{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: tc.ns, Name: "first"}, og); err != nil {
				t.Fatal(err)
			}
			og.Spec.TargetNamespaces = append(og.Spec.TargetNamespaces, "no-such-namespace")
			if err := c.Update(ctx, og); err != nil {
				t.Fatalf("a missing target namespace is never denied: %v", err)
			}
			if got := w.Take(); strings.Contains(got, "targets namespaces that do not exist: no-such-namespace;") != tc.others {
				t.Errorf("missing target namespace: warnings %q, want the warning: %v", got, tc.others)
			}
		})
	}

	t.Run("lookups failing", func(t *testing.T) {
		ns := testenv.Namespace(t, env.Client, ogFailOpenNamespace)
		if err := c.Create(ctx, newOperatorGroup(ns, "first")); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			webhook string
			obj     client.Object
		}{
			{validate.OperatorGroupsWebhook, newOperatorGroup(ns, "second", "no-such-namespace")},
			{validate.SubscriptionsWebhook, builders.Subscription(ns, "sub", "etcd", v1alpha1.ApprovalAutomatic)},
		} {
			counter := metrics.LookupErrors.WithLabelValues(tc.webhook)
			before := testutil.ToFloat64(counter)
			w.Take()
			if err := c.Create(ctx, tc.obj); err != nil {
				t.Errorf("%T with its lookup failing: %v, want it admitted", tc.obj, err)
			}
			if got := w.Take(); !strings.Contains(got, "OperatorGroup checks not done") {
				t.Errorf("%T with its lookup failing: warnings %q, want the lookup's failure", tc.obj, got)
			}
			if got := testutil.ToFloat64(counter) - before; got != 1 {
				t.Errorf("%s: lookup errors increased by %v, want 1", tc.webhook, got)
			}
		}
	})
}
