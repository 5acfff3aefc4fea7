// Package cluster runs olmguard's real local end-to-end cluster: etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok (fake nodes) started by kwokctl's binary runtime
// from the binaries hack/test-binaries.sh builds, with OLM's CRDs installed.
//
// It is the single source of truth for that cluster: hack/cluster.sh (make cluster-up) runs
// ./test/cluster/cmd/olmguard-cluster, and test binaries use Start, or Main and Shared. The kwokctl
// configuration is the template hack/kwok/kwokctl.yaml (plus hack/kwok/node-heartbeat.yaml); the
// clusters live under WorkDir(), outside the clone.
//
// Nodes are kwok nodes annotated kwok.x-k8s.io/node=fake. FailNode removes the annotation: kwok stops
// the node's heartbeats and kube-controller-manager marks it NotReady (Ready=Unknown, taint
// node.kubernetes.io/unreachable) about 8 s later; RestoreNode puts it back.
package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/testbin"
	"github.com/olmguard/olmguard/test/testenv"
)

// Options configure Start.
type Options struct {
	// Name of the kwokctl cluster; default "olmguard-<pid>". Clusters run side by side under
	// distinct names.
	Name string
	// Nodes is the number of kwok nodes to create (kwok-node-0, ...); default 3.
	Nodes int
	// BinDir holds the binaries (Binaries); default testbin.Dir().
	BinDir string
	// Persistent keeps the cluster when the process ends without Stop (hack/cluster.sh up).
	// Otherwise a watchdog process deletes it once this process is gone, whatever the reason.
	Persistent bool
	// Log receives progress lines; default os.Stderr.
	Log io.Writer
	// APIServerArgs are extra kube-apiserver flags (name without dashes -> value), e.g.
	// admission-control-config-file; with the binary runtime, a file path is read from the host.
	APIServerArgs map[string]string
}

// ErrNotKwok is returned by the node and component operations of a cluster Attach connected to.
var ErrNotKwok = errors.New("not a kwok cluster started by test/cluster")

// Cluster is a running cluster.
type Cluster struct {
	Name       string
	Kubeconfig string // path of the admin kubeconfig
	Config     *rest.Config
	Client     client.Client // scheme: testenv.Scheme()
	Clientset  kubernetes.Interface

	kwok     kwokctl
	managed  bool // a kwokctl cluster of ours (false: Attach)
	log      io.Writer
	watchdog interface{ Kill() error }

	mu    sync.Mutex
	nodes []string
	// onStop runs before the cluster is deleted: the processes started against it (OLM).
	onStop []func()
}

// Node labels and annotations.
const (
	// KwokNodeAnnotation marks the nodes kwok manages (value "fake").
	KwokNodeAnnotation = "kwok.x-k8s.io/node"
	// NodeTypeLabel=kwok marks the nodes test/cluster creates.
	NodeTypeLabel = "type"
	// ZoneLabel is the well-known topology label; nodes spread over zone-a, zone-b and zone-c.
	ZoneLabel = "topology.kubernetes.io/zone"
)

// Start creates the named cluster, installs the OLM CRDs (testenv.CRDs(): olmguard's own, or
// OLM's from OLMGUARD_OLM_CRDS), creates the nodes and waits until they are Ready and the default
// ServiceAccount exists. A cluster of that name that is running already is used as it is; one
// that exists but is stopped is started again and set up as above. It fails with
// ErrMissingBinaries when the binary directory is incomplete.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("olmguard-%d", os.Getpid())
	}
	if opts.Nodes <= 0 {
		opts.Nodes = 3
	}
	if opts.Log == nil {
		opts.Log = os.Stderr
	}
	if opts.BinDir == "" {
		var missing string
		if opts.BinDir, missing = testbin.Check(Binaries...); missing != "" {
			return nil, fmt.Errorf("%w: %s not found in %q (run `make binaries` or set %s)", ErrMissingBinaries, missing, opts.BinDir, testbin.EnvDir)
		}
	} else {
		for _, b := range Binaries {
			if _, err := os.Stat(opts.BinDir + "/" + b); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrMissingBinaries, err)
			}
		}
	}

	start := time.Now()
	c := &Cluster{
		Name:       opts.Name,
		Kubeconfig: KubeconfigPath(opts.Name),
		kwok:       kwokctl{name: opts.Name, binDir: opts.BinDir, apiServerArgs: opts.APIServerArgs},
		managed:    true,
		log:        opts.Log,
	}
	if !opts.Persistent {
		reapAbandoned(ctx, opts.BinDir)
		wd, err := c.kwok.startWatchdog(os.Getpid())
		if err != nil {
			return nil, fmt.Errorf("starting the cluster watchdog: %w", err)
		}
		c.watchdog = wd.Process
		if err := recordOwner(c.Name, os.Getpid()); err != nil {
			return nil, err
		}
	}
	fail := func(err error) (*Cluster, error) {
		c.dumpLogs()
		if !opts.Persistent {
			_ = c.Stop()
		}
		return nil, fmt.Errorf("cluster %s: %w", opts.Name, err)
	}

	if c.kwok.exists() && serving(ctx, c.Kubeconfig) {
		// Running already (make cluster-up twice): leave it as it is.
		if err := c.connect(); err != nil {
			return fail(err)
		}
		if err := c.loadNodes(ctx); err != nil {
			return fail(err)
		}
		c.logf("cluster %s is running: reusing it as it is, kubeconfig %s", c.Name, c.Kubeconfig)
		return c, nil
	}
	restart := c.kwok.exists()
	verb := "creating"
	if restart {
		verb = "starting the stopped"
	}
	c.logf("%s cluster %s (kwokctl binary runtime, binaries from %s)", verb, c.Name, opts.BinDir)
	// The cluster's ports are its own (claimPorts), but a process outside test/cluster may still
	// bind one first and make the component exit (etcd: "bind: address already in use"): such a
	// cluster is created anew, with other ports. Any other failure ends the start.
	for attempt := 1; ; attempt++ {
		err := c.kwok.create(ctx)
		if err == nil {
			c.logf("cluster %s: control plane up in %s", c.Name, time.Since(start).Round(100*time.Millisecond))
			if err = c.connect(); err == nil {
				err = c.waitServing(ctx)
			}
		}
		if err == nil {
			break
		}
		if attempt == maxCreateAttempts || restart || !errors.Is(err, errPortTaken) && !c.portTaken() {
			return fail(err)
		}
		c.logf("cluster %s: a component's port was taken by another process (%v): creating the cluster again", c.Name, err)
		if err := c.kwok.delete(ctx); err != nil {
			return fail(err)
		}
	}
	if _, err := c.StartExited(ctx); err != nil {
		return fail(err)
	}
	if err := c.installCRDs(ctx, true); err != nil {
		return fail(err)
	}
	if err := c.loadNodes(ctx); err != nil {
		return fail(err)
	}
	var initial []string
	for i := 0; i < opts.Nodes; i++ {
		name := fmt.Sprintf("kwok-node-%d", i)
		initial = append(initial, name)
		if err := c.createNode(ctx, name, nil, i); err != nil {
			return fail(err)
		}
		if restart { // it may have been left failed
			if err := c.RestoreNode(ctx, name); err != nil {
				return fail(err)
			}
		}
	}
	for _, n := range initial {
		if err := c.WaitNodeReady(ctx, n, true); err != nil {
			return fail(err)
		}
	}
	if err := c.waitServiceAccount(ctx, metav1.NamespaceDefault); err != nil {
		return fail(err)
	}
	c.logf("cluster %s ready in %s: %d nodes Ready, kubeconfig %s", c.Name,
		time.Since(start).Round(100*time.Millisecond), len(initial), c.Kubeconfig)
	return c, nil
}

// Attach connects to an existing cluster (kind, or any other) through a kubeconfig. Nothing is
// created but missing OLM CRDs; Stop does nothing; node failures and component restarts are not
// available (ErrNotKwok) and Nodes lists the nodes found.
func Attach(ctx context.Context, kubeconfig string) (*Cluster, error) {
	c := &Cluster{Name: "external", Kubeconfig: kubeconfig, log: os.Stderr}
	if err := c.connect(); err != nil {
		return nil, err
	}
	if err := c.waitServing(ctx); err != nil {
		return nil, err
	}
	if err := c.installCRDs(ctx, false); err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := c.Client.List(ctx, nodes); err != nil {
		return nil, err
	}
	for _, n := range nodes.Items {
		c.nodes = append(c.nodes, n.Name)
	}
	sort.Strings(c.nodes)
	return c, nil
}

// IsKwok reports whether the cluster is a kwok cluster started by this package (false for Attach).
func (c *Cluster) IsKwok() bool { return c.managed }

// Stop deletes the cluster (kwokctl delete cluster) and its files. It does nothing for a cluster
// Attach connected to.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	stops := c.onStop
	c.onStop = nil
	c.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	if !c.managed {
		return nil
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := c.kwok.delete(ctx)
	if c.watchdog != nil {
		_ = c.watchdog.Kill()
	}
	if err != nil {
		return err
	}
	c.logf("cluster %s deleted in %s", c.Name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Down deletes the named cluster, if it exists, with the binaries in binDir ("": testbin.Dir()).
func Down(ctx context.Context, name, binDir string) error {
	if binDir == "" {
		var missing string
		if binDir, missing = testbin.Check("kwokctl"); missing != "" {
			return fmt.Errorf("%w: kwokctl not found in %q", ErrMissingBinaries, binDir)
		}
	}
	return (&kwokctl{name: name, binDir: binDir}).delete(ctx)
}

func (c *Cluster) logf(format string, args ...any) {
	fmt.Fprintf(c.log, "[cluster] "+format+"\n", args...)
}

func (c *Cluster) connect() error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	// Tests create and watch many objects at once; the default 5 QPS would throttle them.
	cfg.QPS, cfg.Burst = 200, 400
	c.Config = cfg
	if c.Clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	c.Client, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	return err
}

// serving reports whether the cluster behind kubeconfig answers /readyz.
func serving(ctx context.Context, kubeconfig string) bool {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return false
	}
	cfg.Timeout = testenv.Patience
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return false
	}
	_, err = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err == nil
}

func (c *Cluster) waitServing(ctx context.Context) error {
	var last error
	foreign := 0
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		_, last = c.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if servedByAnother(last) {
			foreign++
		} else {
			foreign = 0
		}
		// Five answers in a row (a second) from a server of another CA: another cluster's
		// kube-apiserver has this one's port, and this one will never serve on it.
		if foreign >= 5 {
			return false, fmt.Errorf("%w: %v", errPortTaken, last)
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w (last: %v)", err, last)
	}
	return nil
}

// errPortTaken says that another process answers on a port kwokctl gave this cluster.
var errPortTaken = errors.New("the kube-apiserver's port is served by another cluster's kube-apiserver")

// servedByAnother reports whether err is a TLS handshake with a server whose certificate this
// cluster's CA did not sign: on this machine, another kwok cluster's kube-apiserver on the port
// kwokctl chose (tiers run side by side, seen in TestF4OLMUpgrade).
func servedByAnother(err error) bool {
	var unknown x509.UnknownAuthorityError
	return err != nil && (errors.As(err, &unknown) || strings.Contains(err.Error(), "certificate signed by unknown authority"))
}

// waitServiceAccount waits for kube-controller-manager to create the namespace's default
// ServiceAccount: before that, the ServiceAccount admission plugin rejects pods.
func (c *Cluster) waitServiceAccount(ctx context.Context, namespace string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, testenv.Patience, true, func(ctx context.Context) (bool, error) {
		_, err := c.Clientset.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("no default ServiceAccount in namespace %s: %w", namespace, err)
	}
	return nil
}

// CreateNamespace creates a namespace (an existing one is fine) and waits for its default
// ServiceAccount, so that pods can be created in it right away.
func (c *Cluster) CreateNamespace(ctx context.Context, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return c.waitServiceAccount(ctx, name)
}

// FreshNamespace creates a namespace of its own for test tb (testenv.FreshNamespace: named prefix,
// a dash and a generated suffix), deleted when the test ends, and waits for its default
// ServiceAccount, so that pods can be created in it right away.
func (c *Cluster) FreshNamespace(ctx context.Context, tb testing.TB, prefix string) string {
	tb.Helper()
	name := testenv.FreshNamespace(tb, c.Client, prefix, testenv.DeleteAtEnd())
	if err := c.waitServiceAccount(ctx, name); err != nil {
		tb.Fatal(err)
	}
	return name
}

// KubeClient returns Client (scenario.NodeFaults reads the client through it).
func (c *Cluster) KubeClient() client.Client { return c.Client }

// Nodes returns the names of the kwok nodes created for this cluster (including AddNode's), sorted.
func (c *Cluster) Nodes() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.nodes)
}

func (c *Cluster) addNodeName(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Contains(c.nodes, name) {
		c.nodes = append(c.nodes, name)
		sort.Strings(c.nodes)
	}
}
