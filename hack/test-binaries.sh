#!/usr/bin/env bash
# Builds the binaries the integration and end-to-end tests need (and promtool, for the alert
# rules' tests) from the Go module proxy, at the versions pinned in hack/versions.env, and caches
# them outside the clone:
#   ${OLMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/olmguard}/bin/<component>-<version>/
# A second run finds them and returns in well under a second.
#
#   hack/test-binaries.sh build   build what is missing, then print the bin directory
#   hack/test-binaries.sh dir     print the bin directory (nothing is built)
#   hack/test-binaries.sh kubelet build the kubelet and kubectl if missing, then print the kubelet's path
#   hack/test-binaries.sh golangci-lint  build golangci-lint if missing, then print its path
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

cache=${OLMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/olmguard}
bindir="$cache/bin/k8s-$KUBE_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION-prometheus-$PROMETHEUS_VERSION"

log() { printf '[test-binaries] %s\n' "$*" >&2; }

# A scratch module whose only purpose is to resolve one upstream module at a pinned version.
scratch_module() { # dir require-line [replace-lines]
  local dir=$1
  rm -rf "$dir" && mkdir -p "$dir"
  printf 'module olmguard.local/build\n\ngo 1.26\n\nrequire %s\n%s\n' "$2" "${3:-}" >"$dir/go.mod"
}

timed() { # label command...
  local label=$1 start=$SECONDS; shift
  log "building $label (a cold build can take several minutes; progress below)"
  "$@"
  log "built $label in $((SECONDS - start))s"
}

# with_progress runs a command whose output names one compiled package per line, and prints a count
# every 200 lines instead; its exit status is the command's.
with_progress() {
  "$@" 2>&1 | awk '{n++; if (n % 200 == 0) printf "[test-binaries]   ... %d packages compiled\n", n > "/dev/stderr"}'
  return "${PIPESTATUS[0]}"
}

# kube_module prepares the scratch module that builds k8s.io/kubernetes commands into $kube_dir,
# and the ldflags that stamp their version in $kube_ldflags.
kube_module() {
  kube_dir="$cache/build/kubernetes-$KUBE_VERSION"
  local minor
  minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
  # Without these the binaries report v0.0.0-master and version-gated code misbehaves.
  kube_ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  [ -f "$kube_dir/go.mod" ] && return 0
  # k8s.io/kubernetes points its staging modules at ./staging; a consumer must pin them itself.
  local gomod staging
  gomod=$(GOFLAGS= go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  staging=$(sed -n 's#^[[:space:]]*\(k8s.io/[^[:space:]]*\) => ./staging/.*#\1#p' "$gomod" | sort -u)
  local replaces="replace (" m
  for m in $staging; do replaces+=$'\n\t'"$m => $m v0.${KUBE_VERSION#v1.}"; done
  replaces+=$'\n)'
  scratch_module "$kube_dir" "k8s.io/kubernetes $KUBE_VERSION" "$replaces"
}

build_kubernetes() {
  local out="$cache/bin/kubernetes-$KUBE_VERSION"
  [ -x "$out/kube-apiserver" ] && [ -x "$out/kube-controller-manager" ] && [ -x "$out/kube-scheduler" ] && return 0
  kube_module
  mkdir -p "$out.tmp"
  # go build -v names each package it compiles: counted, not printed. Only the build's output goes
  # through the counter, so timed's own lines (and the time it took) still reach the log.
  (cd "$kube_dir" && timed "kube-apiserver, kube-controller-manager, kube-scheduler $KUBE_VERSION" \
    with_progress env GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 go build -v -trimpath -ldflags "$kube_ldflags" -o "$out.tmp/" \
      k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# The kubelet of the real-node tier, and the kubectl that installs olmguard there as users do,
# from the same scratch module as the control plane.
build_kubelet() {
  local out="$cache/bin/kubelet-$KUBE_VERSION"
  [ -x "$out/kubelet" ] && [ -x "$out/kubectl" ] && return 0
  kube_module
  mkdir -p "$out.tmp"
  (cd "$kube_dir" && timed "kubelet and kubectl $KUBE_VERSION" \
    env GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 go build -trimpath -ldflags "$kube_ldflags" -o "$out.tmp/" \
      k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_etcd() {
  local out="$cache/bin/etcd-$ETCD_VERSION" dir="$cache/build/etcd-$ETCD_VERSION"
  [ -x "$out/etcd" ] && return 0
  scratch_module "$dir" "go.etcd.io/etcd/server/v3 $ETCD_VERSION"
  mkdir -p "$out.tmp"
  (cd "$dir" && timed "etcd $ETCD_VERSION" env GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w" -o "$out.tmp/etcd" go.etcd.io/etcd/server/v3)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

build_kwok() {
  local out="$cache/bin/kwok-$KWOK_VERSION" dir="$cache/build/kwok-$KWOK_VERSION"
  [ -x "$out/kwok" ] && [ -x "$out/kwokctl" ] && return 0
  scratch_module "$dir" "sigs.k8s.io/kwok $KWOK_VERSION"
  mkdir -p "$out.tmp"
  (cd "$dir" && timed "kwok and kwokctl $KWOK_VERSION" env GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=$KWOK_VERSION" -o "$out.tmp/" \
      sigs.k8s.io/kwok/cmd/kwok sigs.k8s.io/kwok/cmd/kwokctl)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# promtool checks and unit-tests the alert rules (manifests/components/prometheusrule). Its
# service-discovery plugins (cloud SDKs) are left out with remove_all_sd: rule tests need none.
build_promtool() {
  local out="$cache/bin/promtool-$PROMETHEUS_VERSION" dir="$cache/build/prometheus-$PROMETHEUS_VERSION"
  [ -x "$out/promtool" ] && return 0
  scratch_module "$dir" "github.com/prometheus/prometheus $PROMETHEUS_VERSION"
  # v0.3XX.Y is Prometheus 3.XX.Y: promtool --version says so.
  local minor=${PROMETHEUS_VERSION#v0.3} patch=${PROMETHEUS_VERSION##*.}
  minor=${minor%%.*}
  mkdir -p "$out.tmp"
  (cd "$dir" && timed "promtool $PROMETHEUS_VERSION" env GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -tags remove_all_sd -ldflags "-s -w -X github.com/prometheus/common/version.Version=3.$((10#$minor)).$patch" \
      -o "$out.tmp/promtool" github.com/prometheus/prometheus/cmd/promtool)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

# golangci-lint for make lint, at the version pinned like the test binaries' (.golangci.yml says
# which linters run).
build_golangci_lint() {
  local out="$cache/bin/golangci-lint-$GOLANGCI_LINT_VERSION" dir="$cache/build/golangci-lint-$GOLANGCI_LINT_VERSION"
  [ -x "$out/golangci-lint" ] && return 0
  scratch_module "$dir" "github.com/golangci/golangci-lint/v2 $GOLANGCI_LINT_VERSION"
  mkdir -p "$out.tmp"
  (cd "$dir" && timed "golangci-lint $GOLANGCI_LINT_VERSION" env GOWORK=off GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w -X main.version=${GOLANGCI_LINT_VERSION#v}" -o "$out.tmp/golangci-lint" \
      github.com/golangci/golangci-lint/v2/cmd/golangci-lint)
  rm -rf "$out" && mv "$out.tmp" "$out"
}

link_all() {
  mkdir -p "$bindir"
  local f
  for f in "$cache/bin/kubernetes-$KUBE_VERSION"/* "$cache/bin/etcd-$ETCD_VERSION/etcd" "$cache/bin/kwok-$KWOK_VERSION"/* \
    "$cache/bin/promtool-$PROMETHEUS_VERSION/promtool"; do
    ln -sf "$f" "$bindir/$(basename "$f")"
  done
}

case "${1:-build}" in
  dir) echo "$bindir" ;;
  build)
    # One build at a time per machine: concurrent make invocations wait for each other.
    mkdir -p "$cache"
    exec 9>"$cache/.build.lock"
    flock 9
    build_etcd
    build_kwok
    build_kubernetes
    build_promtool
    link_all
    echo "$bindir"
    ;;
  kubelet)
    # The real-node tier's kubelet: built on demand, cached beside the control plane's binaries.
    mkdir -p "$cache"
    exec 9>"$cache/.build.lock"
    flock 9
    build_kubelet
    echo "$cache/bin/kubelet-$KUBE_VERSION/kubelet"
    ;;
  golangci-lint)
    mkdir -p "$cache"
    exec 9>"$cache/.build.lock"
    flock 9
    build_golangci_lint
    echo "$cache/bin/golangci-lint-$GOLANGCI_LINT_VERSION/golangci-lint"
    ;;
  *) echo "usage: $0 build|dir|kubelet|golangci-lint" >&2; exit 2 ;;
esac
