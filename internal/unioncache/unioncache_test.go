package unioncache

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
)

// store is a cache.Cache holding ConfigMaps by name, with one informer.
type store struct {
	cache.Cache // not called
	objs        map[string]corev1.ConfigMap
	informer    *controllertest.FakeInformer
}

func (s *store) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	cm, ok := s.objs[key.Name]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
	}
	cm.DeepCopyInto(obj.(*corev1.ConfigMap))
	return nil
}

func (s *store) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	l := list.(*corev1.ConfigMapList)
	l.Items = nil
	for _, cm := range s.objs {
		l.Items = append(l.Items, cm)
	}
	return nil
}

func (s *store) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return s.informer, nil
}

func newStore(names ...string) *store {
	s := &store{objs: map[string]corev1.ConfigMap{}, informer: controllertest.NewFakeInformer()}
	for _, n := range names {
		s.objs[n] = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: n}}
	}
	return s
}

func newUnion(t *testing.T, primary, second *store) *Cache {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return &Cache{Cache: primary, scheme: scheme, also: map[schema.GroupVersionKind]cache.Cache{corev1.SchemeGroupVersion.WithKind("ConfigMap"): second}}
}

// Reads see both selections: Get falls back to the second, List concatenates. Fails with the
// primary cache alone: the second selection's object is not found, nor listed.
func TestReadsSeeBothSelections(t *testing.T) {
	ctx := context.Background()
	u := newUnion(t, newStore("a", "b"), newStore("tracked"))
	for _, name := range []string{"a", "tracked"} {
		if err := u.Get(ctx, client.ObjectKey{Name: name}, &corev1.ConfigMap{}); err != nil {
			t.Errorf("Get %s: %v", name, err)
		}
	}
	if err := u.Get(ctx, client.ObjectKey{Name: "none"}, &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of an object in neither: %v, want NotFound", err)
	}
	list := &corev1.ConfigMapList{}
	if err := u.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Errorf("listed %d objects, want 3 (2 + 1)", len(list.Items))
	}
	// A kind without a second selection reads the primary only.
	if err := u.Get(ctx, client.ObjectKey{Name: "x"}, &corev1.Secret{}); err == nil {
		t.Error("a Secret was found in a cache of ConfigMaps")
	}
}

// A handler added to the union receives the events of both informers, and is synced only when
// both are. Fails with the primary's informer alone: the second selection's events are lost.
func TestInformerHandlersSeeBothSelections(t *testing.T) {
	primary, second := newStore(), newStore()
	u := newUnion(t, primary, second)
	inf, err := u.GetInformer(context.Background(), &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		added = append(added, obj.(*corev1.ConfigMap).Name)
	}})
	if err != nil {
		t.Fatal(err)
	}
	primary.informer.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	second.informer.Add(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "tracked"}})
	if len(added) != 2 || added[0] != "a" || added[1] != "tracked" {
		t.Errorf("handler saw %v, want [a tracked]", added)
	}
	primary.informer.Synced()
	if inf.HasSynced() || reg.HasSynced() {
		t.Error("synced while the second informer is not")
	}
	second.informer.Synced()
	if !inf.HasSynced() || !reg.HasSynced() {
		t.Error("not synced once both informers are")
	}
	select { // closed by a goroutine of its own: a generous bound, not a timing
	case <-inf.HasSyncedChecker().Done():
	case <-time.After(time.Minute):
		t.Error("the sync checker is not done once both informers are")
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Errorf("removing the handler: %v", err)
	}
}
