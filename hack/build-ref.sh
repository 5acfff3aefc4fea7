#!/usr/bin/env bash
# Builds olmguard's three binaries from an earlier commit of this repository and prints their
# directory, so that a benchmark measures that code and today's in one run on one machine
# (make bench-scale). They are built as the image builds them (internal/image: no cgo, paths
# trimmed, symbols stripped), as test/procs builds today's. Builds are cached by commit outside the
# clone:
#   ${OLMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/olmguard}/builds/<commit>-image/
#
#   hack/build-ref.sh <commit-ish>
set -euo pipefail

ref=${1:?usage: hack/build-ref.sh <commit-ish>}
root=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
commit=$(git -C "$root" rev-parse --verify "$ref^{commit}") || {
  echo "build-ref: $ref is not a commit of this clone (a shallow clone lacks history: git fetch --unshallow)" >&2
  exit 1
}
cache=${OLMGUARD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/olmguard}
out="$cache/builds/$commit-image"
if [ -x "$out/controller" ] && [ -x "$out/webhook" ] && [ -x "$out/kubectl-olmguard" ]; then
  echo "$out"
  exit 0
fi
src=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$src" >/dev/null 2>&1 || rm -rf "$src"' EXIT
echo "build-ref: building $ref ($commit)" >&2
git -C "$root" worktree add --detach "$src" "$commit" >/dev/null
mkdir -p "$out.tmp"
(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out.tmp/" ./cmd/controller ./cmd/webhook ./cmd/kubectl-olmguard)
rm -rf "$out" && mv "$out.tmp" "$out"
echo "$out"
