// Package authz waits for RBAC grants to take effect. The apiserver's RBAC authorizer reads
// roles and bindings from an informer, so a request made right after a binding's Create can
// still be forbidden: a test's first write would then fail by chance.
package authz

import (
	"context"
	"fmt"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitAllowed returns once the apiserver allows user (with groups) what attrs describe, asking
// with a SubjectAccessReview created by admin, or with ctx's error.
func WaitAllowed(ctx context.Context, admin client.Client, user string, groups []string, attrs authorizationv1.ResourceAttributes) error {
	return wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: groups, ResourceAttributes: &attrs}}
		if err := admin.Create(ctx, sar); err != nil {
			return false, fmt.Errorf("asking whether %s may %s %s: %w", user, attrs.Verb, attrs.Resource, err)
		}
		return sar.Status.Allowed, nil
	})
}
