#!/usr/bin/env bash
# Runs olmguard's test tiers side by side in four lanes and ends with a table of each tier's wall
# time, so the CI budget (CI stops at 90 minutes; the goal is 30 warm and 50 cold on 2 cores) stays
# visible. Three lanes hold the tiers that mostly wait on OLM's throttled syncs in clusters of their
# own (end to end, real OLM once per OLM build, hostile tenant); the fourth runs the tiers that
# mostly compute (lint, unit and envtest, two apiservers, OLM's CRDs) at a lower priority, on the
# CPU the others leave idle while they wait, and then the real node. Every tier runs even if an
# earlier one failed; the exit status is non-zero if any failed.
#   hack/test.sh            all tiers
#   OLM_BUILDS              the OLM builds the real-OLM tier runs on, each in its own cluster (default
#                           "v0.46.0 openshift-4.20 openshift-4.16 openshift-4.18": every scenario on
#                           the first two, the core ones on the others; binaries from ../shared/olm or
#                           OLMGUARD_OLM_BINARIES); OLMGUARD_OLM_VERSION replaces the first
#   OLMGUARD_REALOLM_RESULTS  where the real-OLM tier records its results (default
#                           $XDG_CACHE_HOME/olmguard/realolm-results; make support-matrix reads it)
#   OLMGUARD_REQUIRE_REAL_NODE=1  the real-node tier fails, instead of skipping, on a host that
#                           cannot run containers (the default as root, as on CI)
#   OLMGUARD_HOSTILE_CLIENT_AUTH  1 (the default here): the hostile-tenant tier runs the webhook with
#                           client authentication of the kube-apiserver's calls, and forged reviews
#                           must be refused; 0: default flags, the forged-review attack skipped;
#                           OLMGUARD_HOSTILE_BIG_SUBSCRIPTIONS=<n> (default 200)
#   OLM_CRDS=<dir>          also run REAL_CRD_PKGS (the simulator and the webhook paths) against
#                           OLM's published CRDs
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}

names=() times=() results=()
failed=0
tier() { # name command...
  local name=$1 start=$SECONDS rc
  shift
  echo "== tier: $name"
  "$@"
  rc=$?
  names+=("$name") times+=($((SECONDS - start)))
  if [ $rc -eq 0 ]; then results+=(ok); else results+=(FAIL); failed=1; fi
}

# side_by_side runs lanes at once; a lane is one or more tiers, one per line, each "name|command"
# (the command word-split), run one after another. Each tier's output is printed whole when all
# lanes are done, and each keeps its own wall time in the table, marked as run side by side.
side_by_side() {
  local dir i=0 pids=() tnames=()
  dir=$(mktemp -d)
  for lane in "$@"; do
    local first=$i specs=()
    mapfile -t specs <<<"$lane"
    for spec in "${specs[@]}"; do
      echo "== tier (side by side): ${spec%%|*}"
      tnames+=("${spec%%|*}")
      i=$((i + 1))
    done
    (
      j=$first
      for spec in "${specs[@]}"; do
        date +%s >"$dir/$j.start"
        # shellcheck disable=SC2086 # the command is word-split on purpose
        ${spec#*|} >"$dir/$j.log" 2>&1
        echo $? >"$dir/$j.rc"
        date +%s >"$dir/$j.end"
        j=$((j + 1))
      done
    ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  for i in "${!tnames[@]}"; do
    echo "== tier output: ${tnames[$i]}"
    cat "$dir/$i.log"
    names+=("${tnames[$i]} (side by side)") times+=($(( $(cat "$dir/$i.end") - $(cat "$dir/$i.start") )))
    if [ "$(cat "$dir/$i.rc")" = 0 ]; then results+=(ok); else results+=(FAIL); failed=1; fi
  done
  rm -rf "$dir"
}

# As root the host can be given all a real node needs (hack/install-node-packages.sh), so there
# the tier must run: it fails instead of skipping. Elsewhere it skips and says why.
if [ "$(id -u)" = 0 ]; then export OLMGUARD_REQUIRE_REAL_NODE=${OLMGUARD_REQUIRE_REAL_NODE:-1}; fi

# A lower priority for the computing tiers: the waiting lanes' control planes and OLM keep the CPU
# they ask for, and these tiers take what is left.
background() { nice -n 5 "$@"; }

prebuilt=$(mktemp -d)
# The end-to-end and real-OLM test binaries are built first, so that the lanes do not compile them
# at once.
$GO test -c -o "$prebuilt/" ./test/e2e/ ./test/realolm/tier/ >/dev/null
# What the real node needs is made ready from the start, at the lowest priority: its packages,
# kubelet and kubectl (a cold build of several minutes; at once when cached) and its test binaries.
# Its output is kept for a failure; the tier still builds what it lacks itself.
ahead_log=$prebuilt/ahead.log
(
  nice -n 19 bash -c "hack/install-node-packages.sh && hack/test-binaries.sh kubelet && $GO test -c -o '$prebuilt/' ./test/node/ ./test/realnode/" >"$ahead_log" 2>&1
  echo $? >"$prebuilt/ahead.rc"
) &
ahead=$!

# The real node's tier, once the preparation above has ended (both install Debian packages, which
# cannot happen twice at once).
real_node() {
  while [ ! -e "$prebuilt/ahead.rc" ]; do sleep 2; done
  if [ "$(cat "$prebuilt/ahead.rc")" != 0 ]; then
    echo "== preparing the real node failed (the tier retries what it needs):"
    cat "$ahead_log"
  fi
  hack/install-node-packages.sh
  hack/test-binaries.sh kubelet >/dev/null || return 1
  # One package at a time: each starts the node, and there is one of it per host.
  $GO test -count=1 -p 1 -timeout 20m ./test/node/ ./test/realnode/
}

# The real-OLM tier on each OLM build (every scenario on the first two, the core ones on the others:
# test/realolm/tier/scope_test.go), each in a cluster of its own; their results make the support
# matrix printed at the end.
realolm_tier() { # build
  env OLMGUARD_OLM_VERSION="$1" OLMGUARD_REALOLM_RESULTS="$realolm_results" $GO test -count=1 -timeout 30m ./test/realolm/tier/
}
realolm_results=${OLMGUARD_REALOLM_RESULTS:-${XDG_CACHE_HOME:-$HOME/.cache}/olmguard/realolm-results}
rm -rf "$realolm_results"
read -r -a olm_builds <<<"${OLM_BUILDS:-${OLMGUARD_OLM_VERSION:-v0.46.0} openshift-4.20 openshift-4.16 openshift-4.18}"
realolm_spec() { echo "real OLM (${olm_builds[$1]}): kwok cluster, OLM's own operators|realolm_tier ${olm_builds[$1]}"; }
# The hostile-tenant tier runs with the setting SECURITY.md gives shared clusters: the webhook
# authenticates the kube-apiserver. Its flood of large Subscriptions no longer needs the machine to
# itself: the owner-drop policy it checks after the flood reads the named Subscription only.
hostile_tier() {
  env OLMGUARD_HOSTILE_CLIENT_AUTH="${OLMGUARD_HOSTILE_CLIENT_AUTH:-1}" $GO test -count=1 -timeout 20m ./test/hostile/
}
hostile_spec="hostile tenant: OLM's own operators, a tenant with edit|hostile_tier"
# Three waiting lanes of about the same length (minutes of a warm run alone in brackets): the
# end-to-end tier (12) then the fourth build (core scenarios, 5); the first build (every scenario,
# OLM releases on clusters of their own too: 18) then the hostile tier (3); the second build (every
# scenario, 16) then the third (core scenarios, 5). Builds past the fourth join the lanes in turn.
lanes=("e2e: kwok cluster, olmguard's binaries|$GO test -count=1 -timeout 45m ./test/e2e/")
for i in "${!olm_builds[@]}"; do
  case $i in
    0 | 1) lanes+=("$(realolm_spec "$i")") ;;
    2) lanes[2]+=$'\n'"$(realolm_spec "$i")" ;;
    *) lanes[(i - 3) % 3]+=$'\n'"$(realolm_spec "$i")" ;;
  esac
done
lanes[1]+=$'\n'"$hostile_spec"
# The computing lane (minutes alone: lint 3, unit and envtest 4, two apiservers 1, OLM's CRDs 1),
# then the real node (7), which by then shares the machine with the waiting lanes' last minutes.
# Everything but the tiers that start control planes of their own shape or a real node is a unit or
# envtest package.
unit_pkgs=$($GO list ./... | grep -v -e /test/e2e -e /test/ha -e /test/realolm -e /test/hostile -e /test/node -e /test/realnode)
computing="lint (gofmt, go vet, golangci-lint)|background make --no-print-directory lint"
computing+=$'\n'"unit + envtest|background $GO test -count=1 -timeout 30m $(echo $unit_pkgs)"
computing+=$'\n'"ha: two kube-apiservers, one etcd|background $GO test -count=1 -timeout 20m ./test/ha/"
if [ -n "${OLM_CRDS:-}" ]; then
  computing+=$'\n'"again with OLM's CRDs ($OLM_CRDS)|background env OLMGUARD_OLM_CRDS=$OLM_CRDS $GO test -count=1 -timeout 20m ${REAL_CRD_PKGS:?set by the Makefile}"
fi
computing+=$'\n'"real node: kubelet + containerd, olmguard installed as users do|real_node"
lanes+=("$computing")
side_by_side "${lanes[@]}"
wait "$ahead"
rm -rf "$prebuilt"

if compgen -G "$realolm_results/*.jsonl" >/dev/null; then
  echo
  echo "Support matrix of this run's real-OLM tier (make support-matrix writes it into README.md):"
  $GO run ./hack/supportmatrix "$realolm_results" || failed=1
fi

# The total is the run's own wall time: tiers side by side overlap.
total=$SECONDS
echo
echo "| tier | wall time | result |"
echo "|---|---|---|"
for i in "${!names[@]}"; do
  printf '| %s | %dm%02ds | %s |\n' "${names[$i]}" $((times[i] / 60)) $((times[i] % 60)) "${results[$i]}"
done
printf '| total | %dm%02ds | %s |\n' $((total / 60)) $((total % 60)) "$([ $failed -eq 0 ] && echo ok || echo FAIL)"
exit $failed
