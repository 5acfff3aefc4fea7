package admit

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/pkg/olm/v1alpha1"
)

// CSVReplaces reads the spec.replaces of one CSV of a namespace for the replaces-cycle guard.
type CSVReplaces interface {
	// Replaces returns the spec.replaces of the CSV namespace/name, and whether it takes part in
	// OLM's replacement walk: it exists and is not one of OLM's copies (olm.IsCopiedCSV).
	Replaces(ctx context.Context, namespace, name string) (replaces string, found bool, err error)
}

// csvSlots bounds how many whole CSVs the replaces-cycle guard reads at once.
var csvSlots = make(chan struct{}, 2)

// LiveCSVReplaces reads CSVs one at a time from the apiserver with a consistent GET: two CSVs
// that close a cycle may be applied from one file a moment apart. The guard follows one chain,
// a GET per link (an upgrade leaves a chain of one or two), never lists the namespace: a CSV can
// be megabytes, and a namespace may hold hundreds. A GET holds one of csvSlots, so the process
// decodes at most that many whole CSVs at once; the slots are not the Subscription lookups' (a
// tenant creating CSVs must not delay F1's reads). Only the request's namespace is ever read.
type LiveCSVReplaces struct {
	Reader client.Reader
	// Timeout bounds one GET (DefaultLookupTimeout when zero).
	Timeout time.Duration
}

// Replaces reads the CSV namespace/name. A name no CSV can have (the apiserver gives custom
// resources DNS subdomain names; spec.replaces may hold any string) is not looked up.
func (l LiveCSVReplaces) Replaces(ctx context.Context, namespace, name string) (string, bool, error) {
	if len(validation.IsDNS1123Subdomain(name)) > 0 {
		return "", false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(l.Timeout))
	defer cancel()
	select {
	case csvSlots <- struct{}{}:
		defer func() { <-csvSlots }()
	case <-ctx.Done():
		return "", false, fmt.Errorf("waiting to read CSV %s/%s: %w", namespace, name, ctx.Err())
	}
	csv := &v1alpha1.ClusterServiceVersion{}
	err := l.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, csv)
	switch {
	case apierrors.IsNotFound(err):
		return "", false, nil
	case err != nil:
		return "", false, err
	case olm.IsCopiedCSV(csv.Namespace, csv.Labels, csv.Annotations, string(csv.Status.Reason)):
		return "", false, nil // OLM's walk skips copies
	}
	return csv.Spec.Replaces, true, nil
}
