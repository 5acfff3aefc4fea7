package olmaudit

import (
	"context"
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/doctor"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// limitRecorder records the limit of each Subscription List and fails every read, which ends the
// audit at its first List.
type limitRecorder struct {
	client.Reader
	limits []int64
}

var errStop = errors.New("stop")

func (r *limitRecorder) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1alpha1.SubscriptionList); ok {
		r.limits = append(r.limits, (&client.ListOptions{}).ApplyOptions(opts).Limit)
	}
	return errStop
}

// The controller's periodic audit reads Subscriptions at most 10 to a page: a tenant decides their
// size (a spec.config of a megabyte), and 250 of them in one page would be 250 MiB.
//
// Fails before the fix: the audit read Subscriptions with its general page size, 250.
func TestAuditReadsSubscriptionsInSmallPages(t *testing.T) {
	r := &limitRecorder{}
	if _, err := doctor.Audit(context.Background(), r, auditOptions()); !errors.Is(err, errStop) {
		t.Fatalf("audit: %v, want the reader's error", err)
	}
	if len(r.limits) == 0 {
		t.Fatal("the audit listed no Subscriptions")
	}
	for _, l := range r.limits {
		if l <= 0 || l > 10 {
			t.Errorf("Subscriptions listed with limit %d, want 1 to 10", l)
		}
	}
}
