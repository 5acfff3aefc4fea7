package controller_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/olmguard/olmguard/pkg/controller"
	"github.com/olmguard/olmguard/test/testenv"
)

// /metrics answers only over HTTPS, to callers the kube-apiserver authenticates and authorizes:
// no token 401, a ServiceAccount without the permission 403, with get on /metrics 200.
func TestMetricsNeedAuthorization(t *testing.T) {
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*testenv.Patience)
	defer cancel()
	port := testenv.FreePort(t)
	o := controller.DefaultOptions()
	o.MetricsBindAddress = fmt.Sprintf("127.0.0.1:%d", port)
	o.HealthProbeBindAddress = "0"
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- controller.Run(runCtx, env.Config, o) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := "metrics-scrape"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	httpc := &http.Client{Timeout: testenv.Patience, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	get := func(token string) (int, string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := httpc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	expect := func(what, token string, want int) string {
		t.Helper()
		var code int
		var body string
		// Within Patience: the filter caches a denial for 30 s, so a request that came before the
		// apiserver saw a new binding is answered 403 until then.
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(context.Context) (bool, error) {
			code, body = get(token)
			return code == want, nil
		})
		if err != nil {
			t.Fatalf("%s: status %d (%.200s), want %d", what, code, body, want)
		}
		return body
	}
	expect("no token", "", http.StatusUnauthorized)
	expect("a ServiceAccount without permission", token("stranger"), http.StatusForbidden)
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "scrape-metrics"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "scrape-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "scrape-metrics"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Another ServiceAccount: the filter caches denials for 30 s.
	body := expect("a ServiceAccount allowed get on /metrics", token("scraper"), http.StatusOK)
	if !strings.Contains(body, "olmguard_") {
		t.Errorf("metrics lack olmguard's: %.300s", body)
	}
	if code := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/metrics", port), nil)
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}(); code == http.StatusOK {
		t.Error("/metrics answered over plain HTTP")
	}
}
