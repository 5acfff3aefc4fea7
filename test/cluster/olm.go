package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	operatorsv1 "github.com/olmguard/olmguard/pkg/olm/v1"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
	"github.com/olmguard/olmguard/test/procs"
	"github.com/olmguard/olmguard/test/testbin"
)

// EnvOLMBinaries names the directory holding OLM's own binaries, one subdirectory per version with
// olm.xz, catalog.xz, opm.xz (v0.46.0 only) and SHA256SUMS. Default: ../shared/olm beside the
// checkout.
const EnvOLMBinaries = "OLMGUARD_OLM_BINARIES"

// OLMNamespace is where upstream OLM's operators run and its global catalogs live.
const OLMNamespace = "olm"

// Layout is where a build of OLM runs and where it keeps what it serves cluster-wide: upstream's
// manifests put everything in "olm"; OpenShift runs OLM in its own namespace, its global catalogs
// in another, and ships a global operators namespace with an AllNamespaces OperatorGroup.
type Layout struct {
	// Namespace is OLM's operators' own (OPERATOR_NAMESPACE, olm-operator's --namespace).
	Namespace string
	// CatalogNamespace holds the global catalogs (catalog-operator's --namespace).
	CatalogNamespace string
	// GlobalOperatorsNamespace, when set, is created with the AllNamespaces OperatorGroup
	// GlobalOperatorGroup, as OpenShift ships openshift-operators.
	GlobalOperatorsNamespace string
	// OLMArgs and CatalogArgs are the further arguments each operator is run with.
	OLMArgs, CatalogArgs []string
	// ClusterOperator, when set, is the ClusterOperator (config.openshift.io/v1) olm-operator
	// reports its status in (OpenShift's --writeStatusName). The cluster then serves the kinds of
	// config.openshift.io its fork reads (openShiftConfigCRDs).
	ClusterOperator string
}

// openShiftStatusName is the ClusterOperator OpenShift's manifests have olm-operator report in.
const openShiftStatusName = "operator-lifecycle-manager"

// GlobalOperatorGroup is the name of the OperatorGroup of a layout's global operators namespace.
const GlobalOperatorGroup = "global-operators"

// IsOpenShift reports whether version names a build of OpenShift's fork of OLM (the directories
// openshift-<release> of ../shared/olm).
func IsOpenShift(version string) bool { return strings.HasPrefix(version, "openshift-") }

// LayoutFor returns the layout version runs in: OpenShift's for its fork (the namespaces and the
// ClusterOperator status names of OpenShift's own manifests), upstream's for the others.
func LayoutFor(version string) Layout {
	if IsOpenShift(version) {
		return Layout{
			Namespace:                "openshift-operator-lifecycle-manager",
			CatalogNamespace:         "openshift-marketplace",
			GlobalOperatorsNamespace: "openshift-operators",
			OLMArgs:                  []string{"--writeStatusName=" + openShiftStatusName, "--writePackageServerStatusName=operator-lifecycle-manager-packageserver"},
			CatalogArgs:              []string{"--writeStatusName=operator-lifecycle-manager-catalog"},
			ClusterOperator:          openShiftStatusName,
		}
	}
	return Layout{Namespace: OLMNamespace, CatalogNamespace: OLMNamespace}
}

// OLMBinaries returns a directory holding OLM's olm and catalog binaries of version, and opm,
// decompressed once into the binary cache and checked against SHA256SUMS. Safe for concurrent
// use: tests that start OLM in parallel share one cold cache.
func OLMBinaries(version string) (string, error) {
	unpackMu.Lock()
	defer unpackMu.Unlock()
	src, err := olmSource()
	if err != nil {
		return "", err
	}
	dst := filepath.Join(CacheDir(), "bin", "olm-"+version)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", err
	}
	for _, b := range []struct{ version, name string }{{version, "olm"}, {version, "catalog"}, {"v0.46.0", "opm"}} {
		if err := unpackBinary(filepath.Join(src, b.version), b.name, filepath.Join(dst, b.name)); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// unpackMu lets one caller of this process unpack at a time, so the others find the binaries
// there instead of decompressing them again.
var unpackMu sync.Mutex

func olmSource() (string, error) {
	dir := os.Getenv(EnvOLMBinaries)
	if dir == "" {
		root, err := testbin.RepoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "..", "shared", "olm")
	}
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("OLM's binaries: %s not found (set %s to the directory holding <version>/olm.xz): %w", dir, EnvOLMBinaries, err)
	}
	return dir, nil
}

// unpackBinary decompresses dir/name.xz to dst unless dst already has the sum SHA256SUMS lists.
// It writes a temporary file of its own and renames it over dst, so dst is never open for
// writing: another process may exec it meanwhile (a shared temporary name once let one caller
// rename a file another was still writing, and exec failed with "text file busy").
func unpackBinary(dir, name, dst string) error {
	want, err := listedSum(filepath.Join(dir, "SHA256SUMS"), name)
	if err != nil {
		return err
	}
	if got, err := fileSum(dst); err == nil && got == want {
		return nil
	}
	xz := filepath.Join(dir, name+".xz")
	if _, err := os.Stat(xz); err != nil {
		return fmt.Errorf("OLM's binaries: %s is missing: %w", xz, err)
	}
	out, err := os.CreateTemp(filepath.Dir(dst), filepath.Base(dst)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := out.Name()
	defer func() { _ = os.Remove(tmp) }() // gone after the rename; left by a failure otherwise
	cmd := exec.Command("xz", "-dc", xz)
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	err = cmd.Run()
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("decompressing %s (is xz installed?): %w", xz, err)
	}
	if got, err := fileSum(tmp); err != nil || got != want {
		return fmt.Errorf("OLM's binaries: %s decompresses to sha256 %s, SHA256SUMS says %s (%v)", xz, got, want, err)
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func listedSum(sums, name string) (string, error) {
	f, err := os.Open(sums)
	if err != nil {
		return "", fmt.Errorf("OLM's binaries: %w", err)
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[1] == name {
			return fields[0], nil
		}
	}
	return "", fmt.Errorf("OLM's binaries: %s lists no %s", sums, name)
}

func fileSum(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// OLM is a running olm-operator and catalog-operator of one version, supervised as Kubernetes
// would run them: restarted when they exit.
type OLM struct {
	Version string
	// Layout is where this build runs (LayoutFor(Version)).
	Layout
	c *Cluster
	// Kubeconfig authenticates as OLM's ServiceAccount (bound to cluster-admin, as OLM's own
	// manifests do), so admission sees OLM's usual identity.
	Kubeconfig string
	binDir     string
	logDir     string
	stop       context.CancelFunc
	stopOnce   sync.Once
	wg         sync.WaitGroup

	mu       sync.Mutex
	bundles  map[string]string // bundle image -> its directory on this host
	unpacked map[string]bool   // UIDs of the Jobs whose ConfigMap was filled
}

// StartOLM runs OLM version against the cluster. The cluster must serve OLM's own CRDs.
func (c *Cluster) StartOLM(ctx context.Context, version string) (*OLM, error) {
	return c.StartOLMWith(ctx, version, OLMOptions{})
}

// OLMOptions change how StartOLMWith runs OLM's operators; the zero value runs them as StartOLM.
type OLMOptions struct {
	// OLMArgs are further arguments of olm-operator, e.g.
	// --writePackageServerStatusName=<name>, which OpenShift passes.
	OLMArgs []string
	// CatalogKubeconfig, when set, is given the kubeconfig of OLM's ServiceAccount and returns
	// the kubeconfig catalog-operator runs with instead: e.g. one naming a proxy in front of the
	// apiserver that talks upstream with the given one (realolm.ReadHold).
	CatalogKubeconfig func(kubeconfig string) (string, error)
}

// StartOLMWith runs OLM version against the cluster as o says.
func (c *Cluster) StartOLMWith(ctx context.Context, version string, opts OLMOptions) (*OLM, error) {
	bin, err := OLMBinaries(version)
	if err != nil {
		return nil, err
	}
	o := &OLM{Version: version, Layout: LayoutFor(version), c: c, binDir: bin, bundles: map[string]string{}, logDir: filepath.Join(os.TempDir(), c.Name+"-olm-"+version)}
	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return nil, err
	}
	if o.Kubeconfig, err = c.olmKubeconfig(ctx, o.Namespace, o.logDir); err != nil {
		return nil, err
	}
	if err := c.createLayoutNamespaces(ctx, o.Layout); err != nil {
		return nil, err
	}
	if o.ClusterOperator != "" {
		if err := c.createCRDs(ctx, openShiftConfigCRDs()); err != nil {
			return nil, err
		}
	}
	catalogKubeconfig := o.Kubeconfig
	if opts.CatalogKubeconfig != nil {
		if catalogKubeconfig, err = opts.CatalogKubeconfig(o.Kubeconfig); err != nil {
			return nil, fmt.Errorf("catalog-operator's kubeconfig: %w", err)
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	o.stop = cancel
	env := func(kubeconfig string) []string {
		return append(os.Environ(), "KUBECONFIG="+kubeconfig, "OPERATOR_NAMESPACE="+o.Namespace, "OPERATOR_NAME=olm-operator")
	}
	olmArgs := append(append([]string{"--namespace", o.Namespace}, o.OLMArgs...), opts.OLMArgs...)
	o.supervise(runCtx, "olm", env(o.Kubeconfig), olmArgs...)
	o.supervise(runCtx, "catalog", env(catalogKubeconfig), append([]string{"--namespace", o.CatalogNamespace, "--kubeconfig", catalogKubeconfig,
		"--opmImage", "olmguard.test/opm", "--util-image", "olmguard.test/util"}, o.CatalogArgs...)...)
	o.unpacked = map[string]bool{}
	c.mu.Lock()
	c.onStop = append(c.onStop, o.Stop)
	c.mu.Unlock()
	o.wg.Add(1)
	go func() { defer o.wg.Done(); o.unpackJobs(runCtx) }()
	if o.ClusterOperator != "" {
		// Proof that olm-operator's ClusterOperator controller runs: it creates the object once its
		// cache has synced, which never happens where the kind is not served.
		if err := c.waitClusterOperator(ctx, o.ClusterOperator); err != nil {
			o.Stop()
			return nil, fmt.Errorf("olm-operator %s did not create its ClusterOperator %s (logs in %s): %w", version, o.ClusterOperator, o.logDir, err)
		}
	}
	c.logf("OLM %s running (logs in %s)", version, o.logDir)
	return o, nil
}

// supervise runs bin with args until ctx is done, restarting it after an exit.
func (o *OLM) supervise(ctx context.Context, name string, env []string, args ...string) {
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		for restarts := 0; ctx.Err() == nil; restarts++ {
			logf, err := os.OpenFile(filepath.Join(o.logDir, name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
			if err != nil {
				return
			}
			cmd := exec.CommandContext(ctx, filepath.Join(o.binDir, name), args...)
			cmd.Env, cmd.Stdout, cmd.Stderr = env, logf, logf
			cmd.Cancel = func() error { return cmd.Process.Kill() }
			cmd.SysProcAttr = diesWithParent()
			cmd.WaitDelay = 10 * time.Second
			err = cmd.Run()
			_, _ = fmt.Fprintf(logf, "== %s exited (%v); restart %d\n", name, err, restarts+1)
			_ = logf.Close()
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}

// Stop ends both operators and the catalogs it serves. The cluster's Stop calls it too.
func (o *OLM) Stop() {
	o.stopOnce.Do(func() {
		o.stop()
		o.wg.Wait()
	})
}

// diesWithParent makes a child process get SIGKILL when the test binary that started it dies,
// however it dies, so no operator outlives its cluster.
func diesWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// Logs returns what both operators logged so far.
func (o *OLM) Logs() (string, error) {
	var b strings.Builder
	for _, name := range []string{"olm", "catalog"} {
		data, err := os.ReadFile(filepath.Join(o.logDir, name+".log"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		b.Write(data)
	}
	return b.String(), nil
}

// Dir is the directory of OLM's logs, kept after the run for debugging; tests may put what must
// outlive a single test there (a catalog's bundles).
func (o *OLM) Dir() string { return o.logDir }

// Opm is the path of the opm binary.
func (o *OLM) Opm() string { return filepath.Join(o.binDir, "opm") }

// olmKubeconfig creates OLM's namespace and ServiceAccount, binds it to cluster-admin and writes a
// kubeconfig holding a token of it.
func (c *Cluster) olmKubeconfig(ctx context.Context, namespace, dir string) (string, error) {
	if err := c.CreateNamespace(ctx, namespace); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: olm.ServiceAccountName}}
	if err := c.Client.Create(ctx, sa); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olm-operator-binding-" + namespace},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: olm.ServiceAccountName}}}
	if err := c.Client.Create(ctx, crb); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	tr, err := c.Clientset.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, olm.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("a token for OLM's ServiceAccount: %w", err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: c.Config.CAData,
		CertificateAuthority: c.Config.CAFile, InsecureSkipTLSVerify: c.Config.Insecure}
	kc.AuthInfos["olm"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["olm"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "olm"}
	kc.CurrentContext = "olm"
	path := filepath.Join(dir, "kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// createLayoutNamespaces creates the layout's catalog namespace and its global operators namespace
// with its AllNamespaces OperatorGroup (an empty spec), as OpenShift ships them.
func (c *Cluster) createLayoutNamespaces(ctx context.Context, l Layout) error {
	if err := c.CreateNamespace(ctx, l.CatalogNamespace); err != nil {
		return err
	}
	if l.GlobalOperatorsNamespace == "" {
		return nil
	}
	if err := c.CreateNamespace(ctx, l.GlobalOperatorsNamespace); err != nil {
		return err
	}
	og := &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Namespace: l.GlobalOperatorsNamespace, Name: GlobalOperatorGroup}}
	if err := c.Client.Create(ctx, og); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the global OperatorGroup: %w", err)
	}
	return nil
}

// ServeCatalog serves the file-based catalog in dir with opm on a loopback port and creates
// CatalogSource name in OLM's global catalog namespace pointing at it, then waits until OLM reports it READY.
// bundles maps each bundle image the catalog names to the bundle's directory (manifests/ and
// metadata/): the image name is only a key, nothing is pulled.
func (o *OLM) ServeCatalog(ctx context.Context, name, dir string, bundles map[string]string) error {
	address, err := o.StartCatalogServer(name, dir, bundles)
	if err != nil {
		return err
	}
	cs := &v1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Namespace: o.CatalogNamespace, Name: name},
		Spec: v1alpha1.CatalogSourceSpec{SourceType: v1alpha1.SourceTypeGrpc, Address: address, DisplayName: name}}
	if err := o.c.Client.Create(ctx, cs); apierrors.IsAlreadyExists(err) {
		// Served before, by an earlier OLM on this cluster (an OLM upgrade): point it at this opm.
		patch := fmt.Appendf(nil, `{"spec":{"address":%q}}`, cs.Spec.Address)
		err = o.c.Client.Patch(ctx, cs, client.RawPatch(types.MergePatchType, patch))
		if err != nil {
			return fmt.Errorf("pointing CatalogSource %s at opm: %w", name, err)
		}
	} else if err != nil {
		return err
	}
	return o.CatalogReady(ctx, o.CatalogNamespace, name)
}

// StartCatalogServer serves the file-based catalog in dir with opm on a loopback port until OLM
// stops, and returns the address a CatalogSource's spec.address gives to reach it (OLM's
// operators run on this host). bundles is as for ServeCatalog; name names opm's log.
func (o *OLM) StartCatalogServer(name, dir string, bundles map[string]string) (string, error) {
	port, err := procs.FreePort()
	if err != nil {
		return "", err
	}
	o.mu.Lock()
	for image, d := range bundles {
		o.bundles[image] = d
	}
	o.mu.Unlock()
	runCtx, cancel := context.WithCancel(context.Background())
	prev := o.stop
	o.stop = func() { cancel(); prev() }
	logf, err := os.Create(filepath.Join(o.logDir, "opm-"+name+".log"))
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(runCtx, o.Opm(), "serve", dir, "-p", fmt.Sprint(port), "--pprof-addr", "127.0.0.1:0")
	cmd.Stdout, cmd.Stderr, cmd.WaitDelay = logf, logf, 10*time.Second
	cmd.SysProcAttr = diesWithParent()
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("opm serve: %w", err)
	}
	o.wg.Add(1)
	go func() { defer o.wg.Done(); _ = cmd.Wait(); _ = logf.Close() }()
	return fmt.Sprintf("127.0.0.1:%d", port), nil
}

// CatalogReady waits up to two minutes until OLM reports CatalogSource namespace/name READY.
func (o *OLM) CatalogReady(ctx context.Context, namespace, name string) error {
	cs := &v1alpha1.CatalogSource{}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		state := ""
		err := o.c.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cs)
		if err == nil && cs.Status.ConnectionState != nil {
			state = cs.Status.ConnectionState.LastObservedState
		}
		if state == "READY" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("CatalogSource %s/%s not READY after 2m (state %q, %v); opm logs in %s", namespace, name, state, err, o.logDir)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// unpackJobs does on this host what the extract step of each bundle unpack Job does in a pod:
// kwok completes the Job without running it, so the bundle's manifests are written into the
// Job's ConfigMap here, from the bundle directory its image names.
func (o *OLM) unpackJobs(ctx context.Context) {
	for ctx.Err() == nil {
		jobs, err := o.c.Clientset.BatchV1().Jobs("").List(ctx, metav1.ListOptions{})
		if err == nil {
			for i := range jobs.Items {
				o.unpack(ctx, &jobs.Items[i])
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (o *OLM) unpack(ctx context.Context, job *batchv1.Job) {
	if job.Status.Active+job.Status.Succeeded == 0 {
		return // no pod of it ran: nothing extracted (a failed unpack leaves the ConfigMap empty)
	}
	for _, ctr := range job.Spec.Template.Spec.Containers {
		if ctr.Name != "extract" {
			continue
		}
		ns, cm, image := flagValue(ctr.Command, ctr.Args, "-n"), flagValue(ctr.Command, ctr.Args, "-c"), ""
		for _, e := range ctr.Env {
			if e.Name == "CONTAINER_IMAGE" {
				image = e.Value
			}
		}
		// Each Job's pod extracts once: a Job OLM creates again after its ConfigMap was deleted
		// fills the new ConfigMap.
		key := string(job.UID)
		o.mu.Lock()
		dir, known := o.bundles[image]
		done := o.unpacked[key]
		o.mu.Unlock()
		if !known || done || ns == "" || cm == "" {
			return
		}
		cmd := exec.CommandContext(ctx, o.Opm(), "alpha", "bundle", "extract", "-k", o.c.Kubeconfig, "-m", dir+"/", "-n", ns, "-c", cm, "-z")
		cmd.Env = append(os.Environ(), "CONTAINER_IMAGE="+image)
		out, err := cmd.CombinedOutput()
		o.appendLog("unpack.log", fmt.Sprintf("== %s/%s (Job %s) from %s (%s): %v\n%s", ns, cm, job.Name, dir, image, err, out))
		if err == nil {
			o.mu.Lock()
			o.unpacked[key] = true
			o.mu.Unlock()
		}
		return
	}
}

func (o *OLM) appendLog(name, text string) {
	f, err := os.OpenFile(filepath.Join(o.logDir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	_, _ = f.WriteString(text)
	_ = f.Close()
}

// flagValue finds "-x value" in a container's command and args.
func flagValue(command, args []string, flag string) string {
	all := append(append([]string{}, command...), args...)
	for i, a := range all {
		if a == flag && i+1 < len(all) {
			return all[i+1]
		}
	}
	return ""
}
