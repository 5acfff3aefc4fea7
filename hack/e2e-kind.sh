#!/usr/bin/env bash
# For machines with Docker: a kind cluster with real OLM and cert-manager, olmguard deployed from a
# locally built image with the cert-manager overlay, then `kubectl olmguard doctor` and the
# end-to-end tests that run on any cluster (manifests, cluster basics) against it.
#
# The failure replays of test/e2e drive OLM through olmguard's simulator and run olmguard out of
# cluster; they need the local kwok cluster (`make test`) and skip here, since real OLM would act
# on the simulator's objects too.
#
# Needs: docker, kind, kubectl, curl. Variables: IMG, KIND_CLUSTER (olmguard-e2e),
# OLM_VERSION (v0.28.0), CERT_MANAGER_VERSION (v1.16.2), KEEP=1 to keep the cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

IMG=${IMG:-ghcr.io/olmguard/olmguard:dev}
KIND_CLUSTER=${KIND_CLUSTER:-olmguard-e2e}
OLM_VERSION=${OLM_VERSION:-v0.28.0}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-v1.16.2}

for tool in docker kind kubectl curl; do
  command -v "$tool" >/dev/null || { echo "e2e-kind: $tool is required" >&2; exit 1; }
done

step() { echo "==> $*"; }

step "creating kind cluster $KIND_CLUSTER"
kind get clusters | grep -qx "$KIND_CLUSTER" || kind create cluster --name "$KIND_CLUSTER" --wait 2m
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"; [ "${KEEP:-}" = 1 ] || kind delete cluster --name "$KIND_CLUSTER"' EXIT
kind get kubeconfig --name "$KIND_CLUSTER" >"$kubeconfig"
export KUBECONFIG=$kubeconfig

step "installing OLM $OLM_VERSION from its release manifests"
base=https://github.com/operator-framework/operator-lifecycle-manager/releases/download/$OLM_VERSION
kubectl apply --server-side -f "$base/crds.yaml"
kubectl wait --for=condition=Established crd --all --timeout=2m
kubectl apply --server-side -f "$base/olm.yaml"
kubectl -n olm rollout status deploy/olm-operator deploy/catalog-operator --timeout=5m

step "installing cert-manager $CERT_MANAGER_VERSION"
kubectl apply --server-side -f "https://github.com/cert-manager/cert-manager/releases/download/$CERT_MANAGER_VERSION/cert-manager.yaml"
kubectl -n cert-manager rollout status deploy/cert-manager deploy/cert-manager-webhook deploy/cert-manager-cainjector --timeout=5m

step "building and loading $IMG"
docker build -t "$IMG" .
kind load docker-image "$IMG" --name "$KIND_CLUSTER"

step "deploying olmguard (cert-manager overlay)"
make deploy OVERLAY=cert-manager IMG="$IMG"

step "kubectl olmguard doctor"
go run ./cmd/kubectl-olmguard doctor -A || echo "(doctor found problems: see above)"

step "end-to-end tests against the kind cluster"
OLMGUARD_E2E_KUBECONFIG=$kubeconfig go test -count=1 -v -timeout 30m -run 'TestManifests|TestCluster' ./test/e2e/
