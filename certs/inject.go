package certs

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olmguard"
)

// InjectCABundle sets caBundle on every webhook of the named configurations, and only those. A
// configuration that does not exist yet is skipped: the manifests or the registration create it,
// and the next sync injects. It reports whether it changed a configuration.
func InjectCABundle(ctx context.Context, c client.Client, caBundle []byte, mutating, validating []string) (bool, error) {
	var errs []error
	updated := false
	for _, name := range mutating {
		errs = append(errs, inject(ctx, c, "MutatingWebhookConfiguration", &admissionregistrationv1.MutatingWebhookConfiguration{}, name, &updated, func(o client.Object) bool {
			cfg := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
			changed := false
			for i := range cfg.Webhooks {
				changed = setCABundle(&cfg.Webhooks[i].ClientConfig, caBundle) || changed
			}
			return changed
		}))
	}
	for _, name := range validating {
		errs = append(errs, inject(ctx, c, "ValidatingWebhookConfiguration", &admissionregistrationv1.ValidatingWebhookConfiguration{}, name, &updated, func(o client.Object) bool {
			cfg := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			changed := false
			for i := range cfg.Webhooks {
				changed = setCABundle(&cfg.Webhooks[i].ClientConfig, caBundle) || changed
			}
			return changed
		}))
	}
	return updated, errors.Join(errs...)
}

func inject(ctx context.Context, c client.Client, kind string, obj client.Object, name string, updated *bool, mutate func(client.Object) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		if !mutate(obj) {
			return nil
		}
		if err := c.Update(ctx, obj, client.FieldOwner(olmguard.FieldManager)); err != nil {
			return err
		}
		*updated = true
		return nil
	})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("certs: injecting CA bundle into %s %s: %w", kind, name, err)
	}
	return nil
}

func setCABundle(cc *admissionregistrationv1.WebhookClientConfig, ca []byte) bool {
	if bytes.Equal(cc.CABundle, ca) {
		return false
	}
	cc.CABundle = bytes.Clone(ca)
	return true
}
