#!/usr/bin/env bash
# olmguard's local kwok cluster (etcd, kube-apiserver, kube-controller-manager, kube-scheduler and
# three fake kwok nodes, with OLM's CRDs), from the binaries hack/test-binaries.sh builds.
#
#   hack/cluster.sh up [name]          create it (an existing healthy one is reused); the kubeconfig
#                                      path is printed last on stdout, progress goes to stderr
#   hack/cluster.sh down [name]        delete it
#   hack/cluster.sh kubeconfig [name]  print the kubeconfig path
#
# name defaults to "olmguard"; several clusters with distinct names can run at once. The cluster is
# the one the end-to-end tests use: this script runs ./test/cluster/cmd/olmguard-cluster, and the
# configuration lives in hack/kwok/ and test/cluster. kwokctl keeps the clusters under
# ${OLMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/olmguard}/kwok, outside the clone.
# OLMGUARD_BIN_DIR names the binary directory (the Makefile sets it; default: test-binaries.sh dir).
# OLMGUARD_OLM_CRDS=<dir> installs OLM's published CRDs instead of olmguard's own.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)

usage() { echo "usage: $0 up|down|kubeconfig [name]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
case "$1" in up | down | kubeconfig) ;; *) usage ;; esac

if [ -z "${OLMGUARD_BIN_DIR:-}" ]; then
  OLMGUARD_BIN_DIR=$("$root/hack/test-binaries.sh" dir)
fi
export OLMGUARD_BIN_DIR

cd "$root"
exec go run ./test/cluster/cmd/olmguard-cluster "$@"
