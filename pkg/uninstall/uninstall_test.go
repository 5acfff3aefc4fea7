package uninstall

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

func pod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: olmguard.DefaultNamespace, Name: name, Labels: labels}}
}

// A controller pod still shutting down after its Deployment was scaled to zero would add the
// finalizer back: the uninstall waits for it to go, and fails naming it when it does not.
func TestWaitStopped(t *testing.T) {
	ours := map[string]string{olmguard.NameLabel: olmguard.Name}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		pods    []client.Object
		goes    bool   // the pod is deleted while the uninstall waits
		wantErr string // empty: none
		wantOut string
	}{
		{name: "no pod: no wait"},
		{name: "another workload's pod is not waited for", pods: []client.Object{pod("other", map[string]string{"app": "x"})}},
		{name: "a stopping pod is waited for", pods: []client.Object{pod("olmguard-controller-1", ours)}, goes: true, wantOut: "waiting for 1 olmguard pods to stop"},
		{name: "a pod that stays fails the uninstall, named", pods: []client.Object{pod("olmguard-controller-1", ours)},
			wantErr: "olmguard's pods olmguard-system/olmguard-controller-1 still exist after 300ms", wantOut: "waiting for 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.pods...).Build()
			var out bytes.Buffer
			ctx := context.Background()
			w := &onWrite{w: &out}
			if tc.goes { // the pod goes once the uninstall says it waits for it
				w.do = func() {
					if err := c.Delete(ctx, tc.pods[0]); err != nil {
						t.Error(err)
					}
				}
			}
			timeout := time.Minute // never reached unless the wait is broken
			if tc.wantErr != "" {
				timeout = 300 * time.Millisecond
			}
			err := WaitStopped(ctx, c, "", w, timeout, 10*time.Millisecond)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("WaitStopped: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("WaitStopped: %v, want an error with %q", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Errorf("output %q, want %q", out.String(), tc.wantOut)
			}
		})
	}
}

// onWrite runs do at the first write.
type onWrite struct {
	w  *bytes.Buffer
	do func()
}

func (o *onWrite) Write(p []byte) (int, error) {
	if o.do != nil {
		o.do()
		o.do = nil
	}
	return o.w.Write(p)
}

// olmguard's namespace is the one of the Service its webhook configurations call, when they agree
// on one; none (removed, or called by URL), or several, leave it open.
func TestServedFrom(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ours := map[string]string{olmguard.NameLabel: olmguard.Name}
	svc := func(ns string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "w"}}
	}
	url := "https://x"
	mutating := func(name string, labels map[string]string, cc ...admissionregistrationv1.WebhookClientConfig) client.Object {
		w := &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		for _, c := range cc {
			w.Webhooks = append(w.Webhooks, admissionregistrationv1.MutatingWebhook{ClientConfig: c})
		}
		return w
	}
	validating := func(name string, cc ...admissionregistrationv1.WebhookClientConfig) client.Object {
		w := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: ours}}
		for _, c := range cc {
			w.Webhooks = append(w.Webhooks, admissionregistrationv1.ValidatingWebhook{ClientConfig: c})
		}
		return w
	}
	for _, tc := range []struct {
		name string
		objs []client.Object
		want string
	}{
		{"none", nil, ""},
		{"one namespace", []client.Object{mutating("m", ours, svc("og"), svc("og")), validating("v", svc("og"))}, "og"},
		{"another's configuration is not read", []client.Object{mutating("m", ours, svc("og")), mutating("x", nil, svc("elsewhere"))}, "og"},
		{"by URL", []client.Object{mutating("m", ours, admissionregistrationv1.WebhookClientConfig{URL: &url})}, ""},
		{"two namespaces", []client.Object{mutating("m", ours, svc("og")), validating("v", svc("other"))}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(tc.objs...).Build()
			if got, err := ServedFrom(context.Background(), c); err != nil || got != tc.want {
				t.Errorf("ServedFrom = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
