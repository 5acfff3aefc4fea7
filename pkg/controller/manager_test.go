package controller

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/olmguard/olmguard/internal/cacheneeds"
)

func offlineOptions() Options {
	o := DefaultOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0"
	return o
}

func TestNewManagerRunsSetupsInOrder(t *testing.T) {
	var order []string
	setup := func(name string) Setup {
		return Setup{Name: name, Add: func(mgr manager.Manager) error {
			if mgr == nil {
				t.Errorf("%s: got no manager", name)
			}
			order = append(order, name)
			return nil
		}}
	}
	// manager.New does not contact the apiserver, so an unreachable one is fine here.
	if _, err := NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, offlineOptions(), setup("a"), setup("b")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []string{"a", "b"}) {
		t.Errorf("setups ran as %v, want [a b]", order)
	}
}

func TestNewManagerErrors(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	failing := Setup{Name: "drift", Add: func(manager.Manager) error { return errors.New("boom") }}
	if _, err := NewManager(cfg, offlineOptions(), failing); err == nil || !strings.Contains(err.Error(), `reconciler "drift": boom`) {
		t.Errorf("error = %v, want it to name the reconciler", err)
	}
	if _, err := NewManager(cfg, offlineOptions(), Setup{Name: "empty"}); err == nil {
		t.Error("a Setup without Add was accepted")
	}
	bad := offlineOptions()
	bad.RetryPeriod = 0
	if _, err := NewManager(cfg, bad); err == nil {
		t.Error("invalid options were accepted")
	}
	if _, err := NewManager(nil, offlineOptions()); err == nil {
		t.Error("a nil config was accepted")
	}
}

// Two reconcilers declaring one kind with other selectors stop the controller at start, with an
// error naming both. Fails before the fix: the later declaration silently replaced the first.
func TestNewManagerRefusesConflictingCacheNeeds(t *testing.T) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	add := func(manager.Manager) error { return nil }
	a := Setup{Name: "catalog-pods", Add: add, Cache: cacheneeds.Needs{{Object: &corev1.Pod{}, Label: labels.SelectorFromSet(labels.Set{"olm.catalogSource": "c"})}}}
	b := Setup{Name: "other", Add: add, Cache: cacheneeds.Needs{{Object: &corev1.Pod{}}}}
	_, err := NewManager(cfg, offlineOptions(), a, b)
	if err == nil || !strings.Contains(err.Error(), `"catalog-pods"`) || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("error = %v, want a conflict naming both reconcilers", err)
	}
	// One declaration alone is no conflict (manager.New then asks the apiserver, unreachable here).
	if _, err := NewManager(cfg, offlineOptions(), a); err != nil && strings.Contains(err.Error(), "conflicting") {
		t.Errorf("one declaration: %v", err)
	}
}
