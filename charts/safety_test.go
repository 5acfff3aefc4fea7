package charts_test

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/olmguard/olmguard/charts"
)

// TestNetworkPoliciesSelectOnlyOlmguard: every NetworkPolicy selects olmguard's own pods, so
// installed beside other workloads it isolates none of them.
// Fails before the fix: olmguard-default-deny-ingress had podSelector {} and denied ingress to
// every pod of the release namespace (CoreDNS, in kube-system).
func TestNetworkPoliciesSelectOnlyOlmguard(t *testing.T) {
	objs := objects(t, charts.Options{})
	n := 0
	for _, o := range objs {
		if o.GetKind() != "NetworkPolicy" {
			continue
		}
		n++
		np := typed[networkingv1.NetworkPolicy](t, objs, "NetworkPolicy", o.GetName())
		if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "olmguard" {
			t.Errorf("NetworkPolicy %s selects %+v, not only olmguard's pods", np.Name, np.Spec.PodSelector)
		}
	}
	if n != 3 {
		t.Errorf("%d NetworkPolicies, want 3", n)
	}
}

// TestWebhookIngressCIDRs: with networkPolicy.webhookIngressCIDRs, the webhook port accepts
// connections from those CIDRs only; metrics and probes stay reachable. Without, anyone may
// connect, as before.
func TestWebhookIngressCIDRs(t *testing.T) {
	webhookRules := func(t *testing.T, values map[string]any) []networkingv1.NetworkPolicyIngressRule {
		t.Helper()
		return typed[networkingv1.NetworkPolicy](t, objects(t, charts.Options{Values: values}), "NetworkPolicy", "olmguard-webhook").Spec.Ingress
	}
	port := func(p int) networkingv1.NetworkPolicyPort {
		tcp, v := corev1.ProtocolTCP, intstr.FromInt32(int32(p))
		return networkingv1.NetworkPolicyPort{Port: &v, Protocol: &tcp}
	}
	open := webhookRules(t, nil)
	if len(open) != 1 || len(open[0].From) != 0 || !slices.ContainsFunc(open[0].Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntValue() == 9443 }) {
		t.Errorf("default: %+v, want port 9443 open to anyone", open)
	}
	rules := webhookRules(t, map[string]any{"networkPolicy": map[string]any{"webhookIngressCIDRs": []any{"10.0.0.0/24", "fd00::/64"}}})
	if len(rules) != 2 {
		t.Fatalf("rules %+v", rules)
	}
	var cidrs []string
	for _, f := range rules[0].From {
		if f.IPBlock == nil || f.PodSelector != nil || f.NamespaceSelector != nil {
			t.Errorf("peer %+v is not an ipBlock", f)
			continue
		}
		cidrs = append(cidrs, f.IPBlock.CIDR)
	}
	if !slices.Equal(cidrs, []string{"10.0.0.0/24", "fd00::/64"}) || len(rules[0].Ports) != 1 || rules[0].Ports[0].Port.IntValue() != port(9443).Port.IntValue() {
		t.Errorf("webhook port rule %+v", rules[0])
	}
	if len(rules[1].From) != 0 || len(rules[1].Ports) != 2 || slices.ContainsFunc(rules[1].Ports, func(p networkingv1.NetworkPolicyPort) bool { return p.Port.IntValue() == 9443 }) {
		t.Errorf("metrics and probes rule %+v", rules[1])
	}
}

// TestSharedNamespacesRefused: the chart refuses Kubernetes' and OLM's own namespaces unless
// allowSharedNamespace is set, and then warns in its notes.
// Fails before the fix: the chart installed into kube-system without a word.
func TestSharedNamespacesRefused(t *testing.T) {
	ch := load(t)
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "olm", "operator-lifecycle-manager",
		"openshift-operator-lifecycle-manager", "openshift-marketplace", "openshift-operators", "operators"} {
		t.Run(ns, func(t *testing.T) {
			_, err := charts.Templates(ch, charts.Options{Namespace: ns})
			if err == nil || !strings.Contains(err.Error(), "namespace "+ns+" is shared") || !strings.Contains(err.Error(), "allowSharedNamespace=true") {
				t.Errorf("error %v, want a refusal naming %s and allowSharedNamespace", err, ns)
			}
			o := charts.Options{Namespace: ns, Values: map[string]any{"allowSharedNamespace": true}}
			if _, err := charts.Templates(ch, o); err != nil {
				t.Fatalf("with allowSharedNamespace: %v", err)
			}
			notes, err := charts.Notes(ch, o)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(notes, "WARNING: namespace "+ns+" is shared") {
				t.Errorf("notes do not warn:\n%s", notes)
			}
		})
	}
	for _, ns := range []string{charts.DefaultNamespace, "platform-olmguard"} {
		notes, err := charts.Notes(ch, charts.Options{Namespace: ns})
		if err != nil {
			t.Fatalf("%s: %v", ns, err)
		}
		if strings.Contains(notes, "WARNING") {
			t.Errorf("%s: notes warn without cause:\n%s", ns, notes)
		}
	}
}

// TestPriorityClassDefault: neither Deployment asks for a PriorityClass by default, so a
// cluster whose ResourceQuota reserves system-cluster-critical for kube-system still starts
// them; a value still sets one.
// Fails before the fix: the webhook defaulted to system-cluster-critical.
func TestPriorityClassDefault(t *testing.T) {
	for _, tc := range []struct {
		values map[string]any
		want   string
	}{
		{nil, ""},
		{map[string]any{"webhook": map[string]any{"priorityClassName": "platform-critical"}}, "platform-critical"},
	} {
		objs := objects(t, charts.Options{Values: tc.values})
		if got := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec.PriorityClassName; got != tc.want {
			t.Errorf("values %v: webhook priority class %q, want %q", tc.values, got, tc.want)
		}
		if got := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-controller").Spec.Template.Spec.PriorityClassName; got != "" {
			t.Errorf("values %v: controller priority class %q", tc.values, got)
		}
	}
}

// TestClientAuthValues: webhook.clientAuth mounts the CA from a ConfigMap or Secret and passes
// --client-ca-file and --client-cn-names as the binary parses them; off, neither is passed.
func TestClientAuthValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		kind   string
		cns    []string
	}{
		{name: "off"},
		{name: "ConfigMap, default name", values: `{webhook: {clientAuth: {enabled: true, caSource: {name: apiserver-ca}}}}`, kind: "ConfigMap", cns: []string{"kube-apiserver"}},
		{name: "Secret, two names", values: `{webhook: {clientAuth: {enabled: true, caSource: {kind: Secret, name: apiserver-ca, key: client-ca.pem}, commonNames: [kube-apiserver, apiserver-b]}}}`,
			kind: "Secret", cns: []string{"kube-apiserver", "apiserver-b"}},
		{name: "any name", values: `{webhook: {clientAuth: {enabled: true, caSource: {name: apiserver-ca}, commonNames: []}}}`, kind: "ConfigMap", cns: []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := yamlValues(t, tc.values)
			objs := objects(t, charts.Options{Values: vals})
			opts, _ := parseWebhook(t, args(t, objs, "olmguard-webhook"))
			spec := typed[appsv1.Deployment](t, objs, "Deployment", "olmguard-webhook").Spec.Template.Spec
			i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == "client-ca" })
			if tc.kind == "" {
				if opts.ClientCAFile != "" || i >= 0 {
					t.Errorf("client auth off, yet --client-ca-file %q, volume %d", opts.ClientCAFile, i)
				}
				return
			}
			if opts.ClientCAFile != "/etc/olmguard/client-ca/ca.crt" || !slices.Equal(opts.ClientCNNames, tc.cns) || opts.ClientCNNames == nil {
				t.Errorf("--client-ca-file %q, --client-cn-names %#v", opts.ClientCAFile, opts.ClientCNNames)
			}
			if i < 0 {
				t.Fatal("no client-ca volume")
			}
			v := spec.Volumes[i]
			var items []corev1.KeyToPath
			switch {
			case tc.kind == "Secret" && v.Secret != nil && v.Secret.SecretName == "apiserver-ca":
				items = v.Secret.Items
			case tc.kind == "ConfigMap" && v.ConfigMap != nil && v.ConfigMap.Name == "apiserver-ca":
				items = v.ConfigMap.Items
			default:
				t.Fatalf("volume %+v, want %s apiserver-ca", v, tc.kind)
			}
			if len(items) != 1 || items[0].Path != "ca.crt" {
				t.Errorf("items %+v", items)
			}
			c := spec.Containers[0]
			if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
				return m.Name == "client-ca" && m.MountPath == "/etc/olmguard/client-ca" && m.ReadOnly && m.SubPath == ""
			}) {
				t.Errorf("mounts %+v", c.VolumeMounts)
			}
		})
	}
}
