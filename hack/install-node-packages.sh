#!/usr/bin/env bash
# Installs, with apt-get, the Debian packages the real-node tier (test/node) needs when any is
# missing: containerd, runc, the CNI plugins, iptables and iproute2. Does nothing when everything
# is there; without root or apt-get it says so and leaves the tier to skip with the reason.
set -euo pipefail
missing=()
for pair in containerd:containerd runc:runc ctr:containerd iptables:iptables ip:iproute2; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "[install-node-packages] not installing ${missing[*]}: needs root and apt-get; the real-node tier will skip" >&2
  exit 0
fi
echo "[install-node-packages] installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null
apt-get install -y -q --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
