package realolm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
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
// resolves. A Subscription created after the first List's answer and before the second List is
// resolved and pointed at the new plan, but missing from the plan's owners. ReadHold makes that
// window as long as the test needs: catalog-operator reaches the apiserver through it, and it
// holds the answer to the first List (already read from the apiserver, so without the new
// Subscription) until the test has created it.
//
// The two Lists are the same request (GET .../namespaces/<ns>/subscriptions, no options); what
// tells them apart is what the sync logged just before each: "checking if subscriptions need
// update" before the first, "resolving subscriptions in namespace" before the second (both with
// namespace=<ns>, at level info, in v0.46.0 and in OpenShift's fork). catalog-operator's logrus
// logger writes each line to its log file before it sends the request, and one namespace is
// synced by one worker at a time (a typed work queue keyed by the namespace), so when a List of
// the namespace arrives, the last of those two lines for it says which List it is.

// The lines catalog-operator's namespace sync logs just before its first and its second List.
const (
	firstListLine  = `msg="checking if subscriptions need update"`
	secondListLine = `msg="resolving subscriptions in namespace"`
)

// ReadHold is a reverse proxy in front of the apiserver for catalog-operator: it forwards every
// request with the credentials of OLM's ServiceAccount, and, once armed for a namespace, holds the
// answer to the first Subscription List of that namespace's next sync until the test releases it.
// It listens on loopback, in plain HTTP, without authentication, for the test's own cluster: any
// local process reaching it acts as OLM's ServiceAccount.
type ReadHold struct {
	proxy  *httputil.ReverseProxy
	server *http.Server
	logf   *os.File

	mu     sync.Mutex
	armed  *Hold
	closed chan struct{}
	once   sync.Once
	// catalog-operator's log, read as it grows: the last sync line (firstListLine or
	// secondListLine) seen for each namespace.
	catalogLog string
	offset     int64
	partial    []byte
	lastLine   map[string]string
}

// Hold is one armed hold: the answer to the first Subscription List of a sync of namespace ns.
type Hold struct {
	ns      string
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// NewReadHold returns a ReadHold, not yet serving: use its Options to start OLM, then SetCatalogLog.
func NewReadHold() *ReadHold {
	return &ReadHold{closed: make(chan struct{}), lastLine: map[string]string{}}
}

// Options is how OLM runs behind h: catalog-operator through h, olm-operator directly.
func (h *ReadHold) Options() cluster.OLMOptions {
	return cluster.OLMOptions{CatalogKubeconfig: h.Kubeconfig}
}

// SetCatalogLog names catalog-operator's log file (catalog.log in cluster.OLM's Dir).
func (h *ReadHold) SetCatalogLog(path string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.catalogLog = path
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

// Close stops the proxy and lets every held answer go.
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

// Arm holds the answer to the next first Subscription List of a sync of ns. One hold at a time.
func (h *ReadHold) Arm(ns string) (*Hold, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.catalogLog == "" {
		return nil, fmt.Errorf("ReadHold: catalog-operator's log not set (SetCatalogLog)")
	}
	if h.armed != nil {
		return nil, fmt.Errorf("ReadHold: a hold is armed already (%s)", h.armed.ns)
	}
	h.armed = &Hold{ns: ns, reached: make(chan struct{}), release: make(chan struct{})}
	h.printf("armed: the first Subscription List of the next sync of %s", ns)
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

// Reached is closed once the answer is held: read from the apiserver, not yet given to
// catalog-operator.
func (hold *Hold) Reached() <-chan struct{} { return hold.reached }

// Release gives catalog-operator the held answer.
func (hold *Hold) Release() { hold.once.Do(func() { close(hold.release) }) }

func (h *ReadHold) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hold := h.take(r)
	if hold == nil {
		h.proxy.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	h.proxy.ServeHTTP(rec, r)
	h.printf("holding the answer (%d, %d bytes) to GET %s", rec.Code, rec.Body.Len(), r.URL.Path)
	close(hold.reached)
	select {
	case <-hold.release:
	case <-h.closed:
	case <-r.Context().Done():
	}
	h.printf("released the answer to GET %s", r.URL.Path)
	for k, v := range rec.Result().Header {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// take returns the armed hold if r is the first Subscription List of a sync of its namespace.
func (h *ReadHold) take(r *http.Request) *Hold {
	if r.Method != http.MethodGet {
		return nil
	}
	// /apis/operators.coreos.com/v1alpha1/namespaces/<ns>/subscriptions, a live List
	// (client.List with empty options): an informer's List or watch names a resourceVersion or
	// watch.
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	if len(parts) != 6 || parts[0] != "apis" || parts[1] != olm.Group || parts[2] != "v1alpha1" || parts[3] != "namespaces" ||
		parts[5] != "subscriptions" || r.URL.Query().Has("watch") || r.URL.Query().Has("resourceVersion") {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	hold := h.armed
	if hold == nil || parts[4] != hold.ns {
		return nil
	}
	if err := h.readCatalogLog(); err != nil {
		h.printf("reading catalog-operator's log: %v", err)
		return nil
	}
	if last := h.lastLine[hold.ns]; last != firstListLine {
		h.printf("a Subscription List of %s after %s: not held", hold.ns, last)
		return nil
	}
	h.armed = nil
	return hold
}

// readCatalogLog reads what catalog-operator logged since the last read and notes, per
// namespace, the last sync line. Called with h.mu held.
func (h *ReadHold) readCatalogLog() error {
	f, err := os.Open(h.catalogLog)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(h.offset, io.SeekStart); err != nil {
		return err
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	h.offset += int64(len(data))
	data = append(h.partial, data...)
	end := bytes.LastIndexByte(data, '\n')
	h.partial = append([]byte(nil), data[end+1:]...)
	for _, line := range strings.Split(string(data[:end+1]), "\n") {
		for _, msg := range []string{firstListLine, secondListLine} {
			if !strings.Contains(line, msg) {
				continue
			}
			for _, field := range strings.Fields(line) {
				if ns, ok := strings.CutPrefix(field, "namespace="); ok {
					h.lastLine[ns] = msg
				}
			}
		}
	}
	return nil
}

func (h *ReadHold) printf(format string, args ...any) {
	if h.logf != nil {
		_, _ = fmt.Fprintf(h.logf, "%s %s\n", time.Now().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
	}
}

// StartHeldOLM runs OLM version on c with catalog-operator behind a ReadHold and serves pkgs from
// the catalog CatalogName, READY on return. Close the ReadHold when done with the cluster.
func StartHeldOLM(ctx context.Context, c *cluster.Cluster, version string, pkgs ...Package) (*cluster.OLM, *ReadHold, error) {
	h := NewReadHold()
	o, err := StartOLMWith(ctx, c, version, h.Options(), pkgs...)
	if err != nil {
		h.Close()
		return nil, nil, err
	}
	// test/cluster writes each operator's output to <name>.log in the OLM's Dir.
	h.SetCatalogLog(filepath.Join(o.Dir(), "catalog.log"))
	return o, h, nil
}

// KeepFinalizer keeps a bundle's unpack Job past its ttlSecondsAfterFinished (OLM v0.43.0 and
// later set 300 s): without the Job OLM unpacks the bundle again, and a sync that has to unpack
// writes no plan (it requeues), so the plan would come from a later sync whose first List already
// has Subscription B.
const KeepFinalizer = "olmguard.test/keep-unpacked"

// HeldSecond is OLM #3199 forced, one namespace after another: Subscription A to Beta is
// installed and settles; the hold is armed, and A is touched so that OLM syncs the namespace; while
// the answer to the sync's first Subscription List is held, Subscription B to Alpha is created;
// then the sync goes on. Its second List has B: it resolves B and writes B's plan, with the owners
// of the first List's answer, which has no B. Alpha's bundle is unpacked once before (a warm-up
// namespace) and its unpack Job kept (KeepFinalizer), so the held sync writes the plan itself.
// Each namespace ends when B's CSV succeeded; the result is B and the plan its
// status.installPlanRef names then. Run OLM with StartHeldOLM.
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
	hold, err := h.Arm(ns)
	if err != nil {
		return r, err
	}
	defer h.Disarm(hold)
	// Any change of a Subscription makes OLM sync its namespace (syncSubscriptions). Touched again
	// while the hold is not reached: every sync starts with the List held, so any sync will do.
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
	err = testenv.Poll(ctx, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(r.Sub), r.Sub)
		return err == nil && r.Sub.Status.CurrentCSV != "", err
	})
	if err != nil {
		return r, fmt.Errorf("subscription b names no current CSV: %w", err)
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
