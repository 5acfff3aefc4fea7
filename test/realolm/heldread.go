package realolm

import (
	"context"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/cluster"
	"github.com/olmguard/olmguard/test/testenv"
)

// OLM #3199 made deterministic. catalog-operator's namespace sync (syncResolvingNamespace, OLM
// v0.46.0 pkg/controller/operators/catalog/operator.go) reads the namespace's Subscriptions twice,
// both times with a live List of the apiserver (not an informer): first (listSubscriptions) for
// the owners it writes into a new InstallPlan, then in ResolveSteps (step_resolver.go) for what it
// resolves. Between the two it GETs, live, the CSV each listed Subscription names in
// status.currentCSV (ensureSubscriptionCSVState). A Subscription created while that GET is held
// is resolved and pointed at the new plan, but missing from the plan's owners. ReadHold holds that
// GET: catalog-operator reaches the apiserver through it, and nothing else does.

// ReadHold is a reverse proxy in front of the apiserver for catalog-operator: it forwards every
// request with the credentials of OLM's ServiceAccount, and, once armed for a namespace, holds
// catalog-operator's GET of one CSV there until the test releases it.
type ReadHold struct {
	proxy  *httputil.ReverseProxy
	server *http.Server
	logf   *os.File

	mu     sync.Mutex
	armed  *Hold
	closed chan struct{}
	once   sync.Once
}

// Hold is one armed hold: the first GET of CSV csv in namespace ns that follows a live List of
// ns's Subscriptions, both made after Arm. The List belongs to the same namespace sync as the
// GET: catalog-operator syncs a namespace in one worker at a time (a typed work queue keyed by
// the namespace), and a sync Lists before it GETs.
type Hold struct {
	ns, csv string
	listed  bool // a live List of ns's Subscriptions came after Arm
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewReadHold returns a ReadHold, not yet serving: use its Kubeconfig as
// cluster.OLMOptions.CatalogKubeconfig.
func NewReadHold() *ReadHold { return &ReadHold{closed: make(chan struct{})} }

// Options is how OLM runs behind h: catalog-operator through h, olm-operator directly.
func (h *ReadHold) Options() cluster.OLMOptions {
	return cluster.OLMOptions{CatalogKubeconfig: h.Kubeconfig}
}

// Kubeconfig starts serving on a loopback port, forwarding to the apiserver of the kubeconfig
// olmKubeconfig with its credentials, and returns the path of a kubeconfig naming the proxy
// (written beside olmKubeconfig). The proxy's log, each hold included, is readhold.log there.
func (h *ReadHold) Kubeconfig(olmKubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", olmKubeconfig)
	if err != nil {
		return "", err
	}
	upstream, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(olmKubeconfig)
	if h.logf, err = os.OpenFile(filepath.Join(dir, "readhold.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err != nil {
		return "", err
	}
	h.proxy = &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(upstream) },
		Transport:     rt,
		FlushInterval: -1, // watches stream
		ErrorLog:      log.New(h.logf, "proxy: ", log.LstdFlags),
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	h.server = &http.Server{Handler: h, ReadHeaderTimeout: time.Minute, ErrorLog: log.New(h.logf, "server: ", log.LstdFlags)}
	go func() { _ = h.server.Serve(l) }()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["held"] = &clientcmdapi.Cluster{Server: "http://" + l.Addr().String()}
	kc.AuthInfos["held"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["held"] = &clientcmdapi.Context{Cluster: "held", AuthInfo: "held"}
	kc.CurrentContext = "held"
	path := filepath.Join(dir, "catalog-kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// Close stops the proxy and lets every held request go.
func (h *ReadHold) Close() {
	h.once.Do(func() {
		close(h.closed)
		if h.server != nil {
			_ = h.server.Close()
		}
		if h.logf != nil {
			_ = h.logf.Close()
		}
	})
}

// Arm holds the next GET of CSV csv in ns that follows a List of ns's Subscriptions. One hold at
// a time.
func (h *ReadHold) Arm(ns, csv string) (*Hold, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed != nil {
		return nil, fmt.Errorf("a hold is armed already (%s/%s)", h.armed.ns, h.armed.csv)
	}
	h.armed = &Hold{ns: ns, csv: csv, reached: make(chan struct{}), release: make(chan struct{})}
	h.printf("armed: GET of CSV %s/%s after a List of its namespace's Subscriptions", ns, csv)
	return h.armed, nil
}

// Disarm drops hold if it was never reached and releases it if it was.
func (h *ReadHold) Disarm(hold *Hold) {
	h.mu.Lock()
	if h.armed == hold {
		h.armed = nil
	}
	h.mu.Unlock()
	hold.Release()
}

// Reached is closed once the GET is held.
func (hold *Hold) Reached() <-chan struct{} { return hold.reached }

// Release forwards the held GET (at once if it comes later).
func (hold *Hold) Release() { hold.once.Do(func() { close(hold.release) }) }

func (h *ReadHold) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if hold := h.take(r); hold != nil {
		h.printf("holding %s %s", r.Method, r.URL.Path)
		close(hold.reached)
		select {
		case <-hold.release:
		case <-h.closed:
		case <-r.Context().Done():
		}
		h.printf("released %s %s", r.Method, r.URL.Path)
	}
	h.proxy.ServeHTTP(w, r)
}

// take returns the armed hold if r is the request it holds, and notes the Subscription Lists
// that come before it.
func (h *ReadHold) take(r *http.Request) *Hold {
	if r.Method != http.MethodGet {
		return nil
	}
	// /apis/operators.coreos.com/v1alpha1/namespaces/<ns>/<resource>[/<name>]
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) < 6 || parts[0] != "apis" || parts[1] != olm.Group || parts[2] != "v1alpha1" || parts[3] != "namespaces" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hold := h.armed
	if hold == nil || parts[4] != hold.ns {
		return nil
	}
	q := r.URL.Query()
	switch {
	// A live List (client.List with empty options), not an informer's List or watch: those name
	// a resourceVersion or watch.
	case len(parts) == 6 && parts[5] == "subscriptions" && !q.Has("watch") && !q.Has("resourceVersion"):
		if !hold.listed {
			h.printf("List of %s's Subscriptions seen", hold.ns)
		}
		hold.listed = true
	case len(parts) == 7 && parts[5] == "clusterserviceversions" && parts[6] == hold.csv && hold.listed:
		h.armed = nil
		return hold
	}
	return nil
}

func (h *ReadHold) printf(format string, args ...any) {
	if h.logf != nil {
		_, _ = fmt.Fprintf(h.logf, "%s %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	}
}

// StartHeldOLM runs OLM version on c with catalog-operator behind a ReadHold and serves pkgs from
// the catalog CatalogName, READY on return. Close the ReadHold after the cluster stops.
func StartHeldOLM(ctx context.Context, c *cluster.Cluster, version string, pkgs ...Package) (*cluster.OLM, *ReadHold, error) {
	h := NewReadHold()
	o, err := StartOLMWith(ctx, c, version, h.Options(), pkgs...)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	return o, h, nil
}

// KeepFinalizer keeps a bundle's unpack Job past its ttlSecondsAfterFinished (OLM v0.43.0 and
// later set 300 s): without the Job OLM unpacks the bundle again, and a sync that has to unpack
// writes no plan (it requeues), so the plan would come from a later sync whose first List already
// has Subscription B.
const KeepFinalizer = "olmguard.test/keep-unpacked"

// HeldSecond is OLM #3199 forced, one namespace after another: Subscription A to Beta is
// installed and settles; the hold is armed, and A is touched so that OLM syncs the namespace; while
// the sync is held between its two Subscription Lists, Subscription B to Alpha is created; then the
// sync goes on. It resolves B and writes B's plan, its owners taken from the List before B. Alpha's
// bundle is unpacked once before (a warm-up namespace) and its unpack Job kept (KeepFinalizer),
// so the held sync writes the plan itself. Each namespace ends when B's CSV succeeded; the result
// is B and the plan its status.installPlanRef names then.
func HeldSecond(h *ReadHold) F1Round {
	return func(ctx context.Context, c client.Client, prefix string, n int) ([]F1Result, error) {
		if err := keepUnpacked(ctx, c, prefix, Alpha); err != nil {
			return nil, err
		}
		var results []F1Result
		for range n {
			r, err := secondWhileHeld(ctx, c, h, prefix)
			if err != nil {
				return nil, fmt.Errorf("namespace %s: %w", r.NS, err)
			}
			results = append(results, r)
		}
		return results, nil
	}
}

func secondWhileHeld(ctx context.Context, c client.Client, h *ReadHold, prefix string) (F1Result, error) {
	ns, err := OperatorNamespace(ctx, c, prefix)
	r := F1Result{NS: ns}
	if err != nil {
		return r, err
	}
	a := NewSubscription(ns, "a", Beta, v1alpha1.ApprovalAutomatic, "")
	if err := c.Create(ctx, a); err != nil {
		return r, err
	}
	if err := CSVSucceeded(ctx, c, ns, Beta.CSVName("1.0.0")); err != nil {
		return r, err
	}
	if err := SubscriptionAtLatest(ctx, c, ns, a.Name); err != nil {
		return r, err
	}
	if err := NoPlanInstalling(ctx, c, ns); err != nil {
		return r, err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(a), a); err != nil {
		return r, err
	}
	hold, err := h.Arm(ns, a.Status.CurrentCSV)
	if err != nil {
		return r, err
	}
	defer h.Disarm(hold)
	// Any change of a Subscription makes OLM sync its namespace (syncSubscriptions). Touched again
	// while the hold is not reached: a sync that went by is harmless, the hold waits for the next.
	err = testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		select {
		case <-hold.Reached():
			return true, nil
		default:
		}
		if err := touch(ctx, c, a); err != nil {
			return false, err
		}
		select {
		case <-hold.Reached():
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(2 * time.Second):
			return false, nil
		}
	})
	if err != nil {
		return r, fmt.Errorf("OLM never synced the namespace after Subscription a was touched: %w", err)
	}
	r.Sub = NewSubscription(ns, "b", Alpha, v1alpha1.ApprovalAutomatic, "")
	if err := c.Create(ctx, r.Sub); err != nil {
		return r, err
	}
	hold.Release()
	if r.Plan, err = PlanOf(ctx, c, r.Sub); err != nil {
		return r, err
	}
	// Settled as a user would see it: B's operator installed, then B and its plan as they are.
	if err := c.Get(ctx, client.ObjectKeyFromObject(r.Sub), r.Sub); err != nil {
		return r, err
	}
	if err := CSVSucceeded(ctx, c, ns, r.Sub.Status.CurrentCSV); err != nil {
		return r, err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(r.Sub), r.Sub); err != nil {
		return r, err
	}
	if ref := r.Sub.Status.InstallPlanRef; ref != nil {
		err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, r.Plan)
	}
	return r, err
}

// touch changes an annotation of the test's own on sub.
func touch(ctx context.Context, c client.Client, sub *v1alpha1.Subscription) error {
	patch := []byte(`{"metadata":{"annotations":{"olmguard.test/touched":"` + time.Now().Format(time.RFC3339Nano) + `"}}}`)
	return c.Patch(ctx, sub.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
}

// keepUnpacked makes sure pkg's head bundle is unpacked in the catalog namespace and stays so: it
// installs pkg in a warm-up namespace unless a kept unpack Job of it exists, and puts
// KeepFinalizer on that Job as soon as OLM creates it.
func keepUnpacked(ctx context.Context, c client.Client, prefix string, pkg Package) error {
	image := pkg.Image(pkg.Versions[len(pkg.Versions)-1])
	job, err := unpackJob(ctx, c, image)
	if err != nil {
		return err
	}
	if job != nil && hasFinalizer(job, KeepFinalizer) && jobComplete(job) {
		return nil
	}
	ns, err := OperatorNamespace(ctx, c, prefix+"-warm")
	if err != nil {
		return err
	}
	sub := NewSubscription(ns, pkg.Name, pkg, v1alpha1.ApprovalAutomatic, "")
	if err := c.Create(ctx, sub); err != nil {
		return err
	}
	err = testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		job, err := unpackJob(ctx, c, image)
		if err != nil || job == nil {
			return false, err
		}
		if !hasFinalizer(job, KeepFinalizer) {
			err := addFinalizer(ctx, c, job, KeepFinalizer)
			return false, client.IgnoreNotFound(ignoreConflict(err))
		}
		return jobComplete(job), nil
	})
	if err != nil {
		return fmt.Errorf("the unpack Job of %s (kept with %s) never completed: %w", image, KeepFinalizer, err)
	}
	return SubscriptionAtLatest(ctx, c, ns, sub.Name)
}

// unpackJob returns OLM's unpack Job of bundle image in the catalog namespace (its extract
// container names the image in CONTAINER_IMAGE), or nil.
func unpackJob(ctx context.Context, c client.Client, image string) (*batchv1.Job, error) {
	jobs := &batchv1.JobList{}
	if err := c.List(ctx, jobs, client.InNamespace(CatalogNamespace), client.HasLabels{"operatorframework.io/bundle-unpack-ref"}); err != nil {
		return nil, err
	}
	for i := range jobs.Items {
		for _, ctr := range jobs.Items[i].Spec.Template.Spec.Containers {
			for _, e := range ctr.Env {
				if ctr.Name == "extract" && e.Name == "CONTAINER_IMAGE" && e.Value == image {
					return &jobs.Items[i], nil
				}
			}
		}
	}
	return nil, nil
}

func jobComplete(job *batchv1.Job) bool {
	for _, cond := range job.Status.Conditions {
		if cond.Type == batchv1.JobComplete && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func hasFinalizer(obj client.Object, f string) bool {
	for _, x := range obj.GetFinalizers() {
		if x == f {
			return true
		}
	}
	return false
}

// addFinalizer appends f to obj's finalizers, refused if obj changed since it was read.
func addFinalizer(ctx context.Context, c client.Client, obj client.Object, f string) error {
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/resourceVersion","value":%q},{"op":"add","path":"/metadata/finalizers/-","value":%q}]`,
		obj.GetResourceVersion(), f)
	if len(obj.GetFinalizers()) == 0 {
		patch = fmt.Sprintf(`[{"op":"test","path":"/metadata/resourceVersion","value":%q},{"op":"add","path":"/metadata/finalizers","value":[%q]}]`,
			obj.GetResourceVersion(), f)
	}
	return c.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(patch)))
}

// ignoreConflict is nil for a refused test of the resourceVersion (the apiserver answers 422, or
// 409 for a write in between): read again and retry.
func ignoreConflict(err error) error {
	if apierrors.IsConflict(err) || apierrors.IsInvalid(err) {
		return nil
	}
	return err
}
