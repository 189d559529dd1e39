#!/usr/bin/env bash
# containerd-setup.sh prepares a Debian machine for Grapnel's containerd
# runtime and its tests. Run it as root; it is idempotent and prints what it
# did.
#
#  1. installs containerd (which ships ctr), runc, containernetworking-plugins
#     (the CNI plugins of nerdctl's bridge network) and busybox-static when
#     they are missing;
#  2. builds nerdctl, the CLI the runtime drives as Ankaios does, into
#     /usr/local/bin/nerdctl when it is missing (GRAPNEL_NERDCTL overrides the
#     path): the version pinned by scripts/nerdctl/go.mod, its downloads
#     checked against scripts/nerdctl/go.sum (about 2 minutes cold);
#  3. builds the test image localhost/grapnel-busybox:latest offline from a
#     busybox rootfs (an OCI image archive made here, `ctr image import`ed),
#     since no image can be pulled.
#
# It does not start containerd: the tests start their own daemon on a
# private socket and root under a temporary directory. To import into a
# running daemon give its socket in GRAPNEL_CONTAINERD_ADDRESS (default
# /run/containerd/containerd.sock, skipped when absent); the tests import the
# archive this script leaves in GRAPNEL_CONTAINERD_IMAGE_TAR (default
# /var/lib/grapnel/containerd-test-image.tar).
#
# nerdctl is not a Debian bookworm package; the Go module proxy serves it,
# but the public checksum database has no entry for it, so the build is
# verified against the go.sum committed in scripts/nerdctl instead (made once
# with GOSUMDB=off; see scripts/nerdctl/tools.go).
set -euo pipefail

image=${GRAPNEL_CONTAINERD_IMAGE:-localhost/grapnel-busybox:latest}
archive=${GRAPNEL_CONTAINERD_IMAGE_TAR:-/var/lib/grapnel/containerd-test-image.tar}
address=${GRAPNEL_CONTAINERD_ADDRESS:-/run/containerd/containerd.sock}
nerdctl=${GRAPNEL_NERDCTL:-/usr/local/bin/nerdctl}

say() { echo "containerd-setup: $*"; }

if [ "$(id -u)" != 0 ]; then
  say "must run as root" >&2
  exit 1
fi

start=$(date +%s)
missing=()
{ command -v containerd && command -v ctr; } >/dev/null 2>&1 || missing+=(containerd)
command -v runc >/dev/null 2>&1 || missing+=(runc)
dpkg-query -W -f='${Status}' containernetworking-plugins 2>/dev/null | grep -q 'ok installed' || missing+=(containernetworking-plugins)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  say "installed in $(( $(date +%s) - start ))s"
else
  say "containerd, runc, containernetworking-plugins and busybox-static already installed"
fi

# 2. nerdctl, built from the pinned tools module. A nerdctl of another
# version at that path is replaced.
want=$(sed -n 's|^require github.com/containerd/nerdctl v\(.*\)$|\1|p' "$(dirname "$0")/nerdctl/go.mod")
if [ -x "$nerdctl" ] && "$nerdctl" --version 2>/dev/null | grep -qx "nerdctl version $want"; then
  say "nerdctl $want already at $nerdctl"
else
  command -v go >/dev/null || { say "go is needed to build nerdctl" >&2; exit 1; }
  built=$(date +%s)
  mkdir -p "$(dirname "$nerdctl")"
  # GOFLAGS cleared: -mod=mod would let go rewrite go.sum instead of
  # checking against it.
  (cd "$(dirname "$0")/nerdctl" && GOFLAGS= go build -trimpath -o "$nerdctl.tmp" github.com/containerd/nerdctl/cmd/nerdctl)
  mv "$nerdctl.tmp" "$nerdctl"
  say "built nerdctl $want into $nerdctl in $(( $(date +%s) - built ))s"
fi

# 3. The test image as an OCI image archive: one layer (busybox as
# /bin/busybox plus one symlink per applet), its config and manifest, named
# by the io.containerd.image.name annotation `ctr image import` reads.
if [ -s "$archive" ]; then
  say "image archive $archive already present"
else
  work=$(mktemp -d /tmp/grapnel-ctd-image.XXXXXX)
  trap 'rm -rf "$work"' EXIT
  root=$work/rootfs
  mkdir -p "$root"/{bin,dev,etc,proc,sys,tmp,run,root,var}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] && continue
    ln -s busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\n' >"$root/etc/group"
  oci=$work/oci
  mkdir -p "$oci/blobs/sha256"
  tar -C "$root" --numeric-owner --owner=0 --group=0 -cf "$work/layer.tar" .
  diffid=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  gzip -n -c "$work/layer.tar" >"$work/layer.tar.gz"
  layer=$(sha256sum "$work/layer.tar.gz" | cut -d' ' -f1)
  layer_size=$(stat -c %s "$work/layer.tar.gz")
  mv "$work/layer.tar.gz" "$oci/blobs/sha256/$layer"
  blob() { # blob FILE: moves FILE into blobs/, prints "digest size"
    local d s
    d=$(sha256sum "$1" | cut -d' ' -f1)
    s=$(stat -c %s "$1")
    mv "$1" "$oci/blobs/sha256/$d"
    echo "$d $s"
  }
  printf '{"architecture":"%s","os":"linux","config":{"Env":["PATH=/bin"],"Cmd":["/bin/sh"]},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$(dpkg --print-architecture)" "$diffid" >"$work/config.json"
  read -r cfg cfg_size < <(blob "$work/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
    "$cfg" "$cfg_size" "$layer" "$layer_size" >"$work/manifest.json"
  read -r man man_size < <(blob "$work/manifest.json")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s"}}]}' \
    "$man" "$man_size" "$image" >"$oci/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$oci/oci-layout"
  mkdir -p "$(dirname "$archive")"
  tar -C "$oci" -cf "$archive.tmp" .
  mv "$archive.tmp" "$archive"
  say "built the OCI archive of $image at $archive"
fi

if [ -S "$address" ]; then
  ctr --address "$address" images import "$archive" >/dev/null
  say "imported $image into the containerd at $address"
fi
say "done in $(( $(date +%s) - start ))s"
