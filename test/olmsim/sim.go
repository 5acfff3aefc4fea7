// Package olmsim performs OLM v0's writes against a real kube-apiserver, as olm-facts.md
// describes them: the same names, labels, ownerReferences and order of requests, including the
// bugs olmguard fixes. Tests drive it step by step (SyncNamespace, ExecutePlan, ...) so that
// interleavings such as OLM issue #3199 can be forced; RunCatalogOperator runs the one loop that
// must react on its own (catalog pods recreated when missing).
//
// Every write goes through a client impersonating OLM's service account, so admission webhooks see
// the same requester they see on a real cluster.
package olmsim

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/test/authz"
)

// Options configure a simulator.
type Options struct {
	// Version is the OLM release whose behaviour is reproduced (default V0_46).
	Version Version
	// Namespace is where OLM runs and where its service account lives (default "olm").
	Namespace string
	// CatalogNamespace is the global catalog namespace (default: Namespace).
	CatalogNamespace string
	// CompleteJobs makes the simulator finish unpack Jobs itself, for control planes without a
	// Job controller (envtest). On a cluster with kube-controller-manager and kwok leave it off.
	CompleteJobs bool
	// FailJobs, with CompleteJobs, makes the simulator fail the unpack Jobs it returns true for
	// (DeadlineExceeded, as a Job whose image is never pulled ends) instead of completing them.
	// Tests may change it between syncs, e.g. set it to nil once the cause is gone.
	FailJobs func(*batchv1.Job) bool
	// DisableCopiedCSVs is OLMConfig's spec.features.disableCopiedCSVs: no copies for
	// AllNamespaces operator groups.
	DisableCopiedCSVs bool
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Sim is one simulated OLM installation (olm-operator and catalog-operator).
type Sim struct {
	Options
	// Client writes as OLM's service account.
	Client client.Client
	// Admin writes as the cluster administrator; used only for set-up (namespaces, RBAC).
	Admin client.Client
	// Hooks let tests interleave their own writes with OLM's.
	Hooks Hooks

	watcher  client.WithWatch
	catalogs *catalogs
	// muInstallPlan serialises ensureInstallPlan, as OLM's mutex does (PR #2545).
	muInstallPlan sync.Mutex
}

// Hooks are called at points where real OLM can be preempted.
type Hooks struct {
	// BetweenSubscriptionLists runs in SyncNamespace after the first live List of Subscriptions and
	// before the resolver's second one: the window of OLM issue #3199.
	BetweenSubscriptionLists func(ctx context.Context, namespace string) error
	// AfterInstallPlanCreate runs between an InstallPlan's Create and its first status write.
	AfterInstallPlanCreate func(ctx context.Context, ip client.Object) error
}

// ServiceAccountUser is the user name OLM's operators authenticate as.
func (o Options) ServiceAccountUser() string {
	return "system:serviceaccount:" + o.Namespace + ":" + olm.ServiceAccountName
}

// serviceAccountGroups are the groups the apiserver gives OLM's service account.
func (o Options) serviceAccountGroups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + o.Namespace, "system:authenticated"}
}

// New returns a simulator writing to the cluster of cfg. cfg must be allowed to impersonate.
func New(cfg *rest.Config, scheme *runtime.Scheme, opts Options) (*Sim, error) {
	if opts.Version == (Version{}) {
		opts.Version = V0_46
	}
	if opts.Namespace == "" {
		opts.Namespace = "olm"
	}
	if opts.CatalogNamespace == "" {
		opts.CatalogNamespace = opts.Namespace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	admin, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	olmCfg := rest.CopyConfig(cfg)
	olmCfg.Impersonate = rest.ImpersonationConfig{UserName: opts.ServiceAccountUser(), Groups: opts.serviceAccountGroups()}
	c, err := client.NewWithWatch(olmCfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	return &Sim{Options: opts, Client: c, Admin: admin, watcher: c, catalogs: &catalogs{}}, nil
}

// Start returns a simulator that has done Setup.
func Start(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts Options) (*Sim, error) {
	s, err := New(cfg, scheme, opts)
	if err != nil {
		return nil, err
	}
	return s, s.Setup(ctx)
}

// Setup creates what OLM's install manifests create: its namespaces, its service account and the
// cluster-admin binding it runs with.
func (s *Sim) Setup(ctx context.Context) error {
	for _, ns := range []string{s.Namespace, s.CatalogNamespace} {
		if err := s.EnsureNamespace(ctx, ns); err != nil {
			return err
		}
	}
	objs := []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: olm.ServiceAccountName, Namespace: s.Namespace}},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "olm-operator-binding-" + s.Namespace},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: olm.ServiceAccountName, Namespace: s.Namespace}},
		},
	}
	for _, o := range objs {
		if err := s.Admin.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("olmsim setup: %w", err)
		}
	}
	// The binding takes effect a moment after its Create (test/authz).
	return authz.WaitAllowed(ctx, s.Admin, s.ServiceAccountUser(), s.serviceAccountGroups(),
		authorizationv1.ResourceAttributes{Namespace: s.Namespace, Verb: "*", Group: "*", Resource: "*"})
}

// EnsureNamespace creates a namespace if it does not exist.
func (s *Sim) EnsureNamespace(ctx context.Context, name string) error {
	err := s.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

func (s *Sim) now() metav1.Time { return metav1.NewTime(s.Now().UTC().Truncate(time.Second)) }

// WithVersion returns the same installation running another OLM release, as after an OLM upgrade
// or downgrade: same namespaces, clients and catalogs.
func (s *Sim) WithVersion(v Version) *Sim {
	o := s.Options
	o.Version = v
	return &Sim{Options: o, Client: s.Client, Admin: s.Admin, watcher: s.watcher, catalogs: s.catalogs}
}
