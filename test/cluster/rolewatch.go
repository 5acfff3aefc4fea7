package cluster

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/test/testenv"
)

// RoleWatch records every moment a ClusterRole with given labels had no rules, between
// WatchEmptiedRoles and Stop: an apply that takes a role's rules away, even for a moment (the
// aggregation controller filling them again), is seen.
type RoleWatch struct {
	c       *Cluster
	labels  map[string]string
	cancel  context.CancelFunc
	emptied chan []string
}

// roleWatchMarker is the ClusterRole Stop creates last: once the watch has seen it, it has seen
// every event before it.
const roleWatchMarker = "olmguard-test-rolewatch-marker"

// WatchEmptiedRoles starts watching the ClusterRoles labelled labels.
func (c *Cluster) WatchEmptiedRoles(ctx context.Context, labels map[string]string) (*RoleWatch, error) {
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w, err := wc.Watch(ctx, &rbacv1.ClusterRoleList{}, client.MatchingLabels(labels))
	if err != nil {
		cancel()
		return nil, err
	}
	r := &RoleWatch{c: c, labels: labels, cancel: cancel, emptied: make(chan []string, 1)}
	go func() {
		defer w.Stop()
		var names []string
		for ev := range w.ResultChan() {
			cr, ok := ev.Object.(*rbacv1.ClusterRole)
			switch {
			case !ok:
			case cr.Name == roleWatchMarker:
				r.emptied <- names
				return
			case len(cr.Rules) == 0:
				names = append(names, fmt.Sprintf("%s (%s)", cr.Name, ev.Type))
			}
		}
		r.emptied <- append(names, "(the watch ended early)")
	}()
	return r, nil
}

// Stop ends the watch and returns the roles seen without rules, with the watch event.
func (r *RoleWatch) Stop(ctx context.Context) ([]string, error) {
	defer r.cancel()
	marker := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: roleWatchMarker, Labels: r.labels},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
	if err := r.c.Client.Create(ctx, marker); err != nil {
		return nil, err
	}
	defer func() { _ = r.c.Client.Delete(context.Background(), marker) }()
	return <-r.emptied, nil
}
