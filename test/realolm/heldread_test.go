package realolm

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// TestReadHoldTakesTheFirstListOnly: armed for a namespace, the hold takes a live List of its
// Subscriptions only when catalog-operator's last sync line for that namespace is the one it logs
// before its first List; never the second List, a List of the resolver, an informer's List or
// watch, another namespace's List, or catalog-operator's GET of a CSV (fails before the fix: the
// hold took the first GET of A's CSV after a List, which on openshift-4.20 was a re-execution of
// A's plan after the sync's second List, and the sync went by unheld).
func TestReadHoldTakesTheFirstListOnly(t *testing.T) {
	const ns = "f1-held-stock-abcde"
	const list = "/apis/operators.coreos.com/v1alpha1/namespaces/" + ns + "/subscriptions"
	line := func(msg, namespace string) string {
		return `time="2026-11-27T03:27:36Z" level=info msg="` + msg + `" id=Dq4aU namespace=` + namespace + "\n"
	}
	first, second := "checking if subscriptions need update", "resolving subscriptions in namespace"
	for _, tc := range []struct {
		name   string
		logged string // catalog-operator's log when the request arrives
		target string
		want   bool
	}{
		{"the first List", line(first, ns), list, true},
		{"the first List, other namespaces' lines after", line(first, ns) + line(second, "other") + line(first, "other"), list, true},
		{"the second List", line(first, ns) + line(second, ns), list, false},
		{"no sync of the namespace logged", line(first, "other"), list, false},
		{"another namespace's first List", line(first, "other"),
			"/apis/operators.coreos.com/v1alpha1/namespaces/other/subscriptions", false},
		{"a namespace whose name ends the same", line(first, "x-"+ns), list, false},
		{"the first line not yet ended", line(second, ns) + line(first, ns)[:40], list, false},
		{"an informer's List", line(first, ns), list + "?resourceVersion=0", false},
		{"a watch", line(first, ns), list + "?watch=true", false},
		{"the GET of A's CSV between the Lists", line(first, ns),
			"/apis/operators.coreos.com/v1alpha1/namespaces/" + ns + "/clusterserviceversions/beta.v1.0.0", false},
		{"the GET of one Subscription", line(first, ns), list + "/a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "catalog.log")
			if err := os.WriteFile(path, []byte(tc.logged), 0o644); err != nil {
				t.Fatal(err)
			}
			h := NewReadHold()
			h.SetCatalogLog(path)
			hold, err := h.Arm(ns)
			if err != nil {
				t.Fatal(err)
			}
			got := h.take(httptest.NewRequest("GET", tc.target, nil))
			if (got == hold) != tc.want || (got != nil && got != hold) {
				t.Fatalf("take(%s) after %q = %v, want held %v", tc.target, tc.logged, got, tc.want)
			}
			if tc.want && h.take(httptest.NewRequest("GET", tc.target, nil)) != nil {
				t.Fatal("a second List was taken by the same hold")
			}
		})
	}
}

// TestReadHoldReadsTheLogAsItGrows: lines logged after a read are seen by the next, a line split
// across two reads included.
func TestReadHoldReadsTheLogAsItGrows(t *testing.T) {
	const ns = "ns"
	path := filepath.Join(t.TempDir(), "catalog.log")
	h := NewReadHold()
	h.SetCatalogLog(path)
	appendLog := func(s string) {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	firstLine := `level=info msg="checking if subscriptions need update" id=a namespace=ns` + "\n"
	secondLine := `level=info msg="resolving subscriptions in namespace" id=a namespace=ns` + "\n"
	for i, step := range []struct {
		add, want string
	}{
		{firstLine, firstListLine},
		{secondLine[:30], firstListLine}, // not ended yet
		{secondLine[30:], secondListLine},
		{"level=info msg=\"syncing\" namespace=ns\n", secondListLine},
		{firstLine, firstListLine},
	} {
		appendLog(step.add)
		if err := h.readCatalogLog(); err != nil {
			t.Fatal(err)
		}
		if got := h.lastLine[ns]; got != step.want {
			t.Fatalf("step %d: last line %q, want %q", i, got, step.want)
		}
	}
}

// TestReadHoldHoldsTheAnswerReadBefore: the held List's answer is read from the apiserver before
// Reached, and catalog-operator gets that answer (not a later one) only after Release; every
// other request goes through at once, with the upstream credentials.
func TestReadHoldHoldsTheAnswerReadBefore(t *testing.T) {
	const ns = "ns"
	var mu sync.Mutex
	body, calls := "only-a", 0
	// https: client-go sends a kubeconfig's credentials to https servers only.
	upstream := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer olm-token" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		calls++
		_, _ = io.WriteString(w, body)
	}))
	defer upstream.Close()
	dir := t.TempDir()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: upstream.URL, InsecureSkipTLSVerify: true}
	kc.AuthInfos["olm"] = &clientcmdapi.AuthInfo{Token: "olm-token"}
	kc.Contexts["olm"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "olm"}
	kc.CurrentContext = "olm"
	olmKubeconfig := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, olmKubeconfig); err != nil {
		t.Fatal(err)
	}
	catalogLog := filepath.Join(dir, "catalog.log")
	if err := os.WriteFile(catalogLog, []byte(`msg="checking if subscriptions need update" namespace=ns`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := NewReadHold()
	defer h.Close()
	path, err := h.Kubeconfig(olmKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	h.SetCatalogLog(catalogLog)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	get := func(p string) string {
		resp, err := http.Get(cfg.Host + p)
		if err != nil {
			t.Error(err)
			return ""
		}
		defer func() { _ = resp.Body.Close() }()
		data, _ := io.ReadAll(resp.Body)
		return string(data)
	}
	if got := get("/api/v1/namespaces"); got != "only-a" {
		t.Fatalf("a request through the proxy: %q", got)
	}
	hold, err := h.Arm(ns)
	if err != nil {
		t.Fatal(err)
	}
	answer := make(chan string, 1)
	go func() { answer <- get("/apis/operators.coreos.com/v1alpha1/namespaces/ns/subscriptions") }()
	<-hold.Reached()
	mu.Lock()
	body = "a-and-b" // B created while the answer is held
	mu.Unlock()
	if got := get("/apis/operators.coreos.com/v1alpha1/namespaces/ns/subscriptions"); got != "a-and-b" {
		t.Fatalf("a List while the hold is taken: %q, want it through at once", got)
	}
	select {
	case got := <-answer:
		t.Fatalf("the held answer came before Release: %q", got)
	default:
	}
	hold.Release()
	if got := <-answer; got != "only-a" {
		t.Fatalf("the held answer: %q, want the one read before Reached", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 3 {
		t.Fatalf("%d requests reached the apiserver, want 3", calls)
	}
}
