// Package deps pins modules that are used only by tests and tooling, so go mod tidy keeps them.
package deps

import (
	_ "github.com/cert-manager/cert-manager/pkg/util/pki"
	_ "github.com/google/go-cmp/cmp"
	_ "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
)
