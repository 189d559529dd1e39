#!/usr/bin/env bash
# chaos-setup.sh prepares a Debian machine for Grapnel's chaos tests
# (chaos/netns and the campaign on top of it). Run it as root; it is
# idempotent and prints what it did.
#
# It installs the tools the namespace harness runs when they are missing:
# iproute2 (ip, for namespaces, veths and the bridge), iptables (faults
# inside the namespaces), nftables (the backend iptables-nft drives) and
# iputils-ping (the reachability check after setup). nsenter comes with
# util-linux, which Debian always has; it is only checked.
set -euo pipefail

say() { echo "chaos-setup: $*"; }

if [ "$(id -u)" != 0 ]; then
  say "must run as root" >&2
  exit 1
fi

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'ok installed'
}

missing=()
for pkg in iproute2 iptables nftables iputils-ping; do
  installed "$pkg" || missing+=("$pkg")
done

if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  say "installed ${missing[*]}"
else
  say "iproute2, iptables, nftables and iputils-ping already installed"
fi

for bin in ip iptables iptables-restore nsenter ping; do
  if ! command -v "$bin" >/dev/null 2>&1; then
    say "$bin still missing after install" >&2
    exit 1
  fi
done
say "ip, iptables, iptables-restore, nsenter and ping are available"
