package setup_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/olmguard/olmguard/pkg/olm"
	"github.com/olmguard/olmguard/test/testenv"
)

// OLM's ServiceAccount step through the apiserver (OLM #3607): catalog-operator's strategic merge
// patch from the live ServiceAccount to its desired one, which before OLM v0.33 removes every
// annotation (and still at v0.46.0 extra labels and imagePullSecrets), keeps the user's IRSA
// annotation, label and pull secret when OLM sends it; the same patch by anyone else removes them:
// olmguard corrects OLM only.
// Fails before the fix: no webhook was registered for ServiceAccounts; OLM's patch removed them.
func TestOLMServiceAccountStepKeepsUserMetadata(t *testing.T) {
	requireEnv(t)
	ctx := context.Background()
	const role = "eks.amazonaws.com/role-arn"
	for _, tc := range []struct {
		name, user string
		kept       bool
	}{
		{"olm", olm.ServiceAccountUser("olm"), true},
		{"someone-else", "someone", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := testenv.Namespace(t, env.Client, "sa-"+tc.name)
			sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "op", Namespace: ns,
				Labels:      map[string]string{olm.ManagedLabel: olm.ManagedLabelValue, "team": "a"},
				Annotations: map[string]string{role: "arn:aws:iam::1:role/op"}},
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "reg"}}}
			if err := env.Client.Create(ctx, sa); err != nil {
				t.Fatal(err)
			}
			// What OLM v0.28's step sends: the new CSV's ownerReference, its label, and the
			// removal of everything the desired ServiceAccount lacks.
			patch := []byte(`{"metadata":{"annotations":null,"labels":{"team":null},"ownerReferences":[{"apiVersion":"operators.coreos.com/v1alpha1",` +
				`"kind":"ClusterServiceVersion","name":"op.v2","uid":"0b6f3c1e-0000-4000-8000-000000000002","controller":false,"blockOwnerDeletion":false}]},` +
				`"imagePullSecrets":null}`)
			cfg := rest.CopyConfig(env.Config)
			cfg.Impersonate = rest.ImpersonationConfig{UserName: tc.user, Groups: []string{"system:masters", "system:authenticated"}}
			c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Patch(ctx, sa, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
				t.Fatal(err)
			}
			if len(sa.OwnerReferences) != 1 || sa.Labels[olm.ManagedLabel] != olm.ManagedLabelValue {
				t.Fatalf("the patch itself did not apply: %+v", sa.ObjectMeta)
			}
			kept := sa.Annotations[role] == "arn:aws:iam::1:role/op" && sa.Labels["team"] == "a" &&
				len(sa.ImagePullSecrets) == 1 && sa.ImagePullSecrets[0].Name == "reg"
			if kept != tc.kept {
				t.Fatalf("kept = %v, want %v: annotations %v, labels %v, imagePullSecrets %v", kept, tc.kept, sa.Annotations, sa.Labels, sa.ImagePullSecrets)
			}
			if !tc.kept && (len(sa.Annotations) != 0 || sa.Labels["team"] != "" || len(sa.ImagePullSecrets) != 0) {
				t.Fatalf("another user's patch was changed: %+v, %v", sa.ObjectMeta, sa.ImagePullSecrets)
			}
		})
	}
}
