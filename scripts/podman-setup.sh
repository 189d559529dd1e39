#!/usr/bin/env bash
# podman-setup.sh prepares a Debian machine for Grapnel's podman runtime and
# its tests. Run it as root; it is idempotent and prints what it did.
#
#  1. installs podman, runc, catatonit (podman builds the pause image of
#     its pods from it, offline) and busybox-static when they are missing;
#  2. writes the engine settings podman needs on machines without systemd
#     and with low default limits (runc, cgroupfs, file events, ulimits);
#  3. builds the test image localhost/grapnel-busybox:latest offline from a
#     busybox rootfs, since no image can be pulled.
#
# GRAPNEL_PODMAN_IMAGE overrides the image name.
set -euo pipefail

image=${GRAPNEL_PODMAN_IMAGE:-localhost/grapnel-busybox:latest}
conf_dir=/etc/containers/containers.conf.d
conf=$conf_dir/50-grapnel.conf

say() { echo "podman-setup: $*"; }

if [ "$(id -u)" != 0 ]; then
  say "must run as root" >&2
  exit 1
fi

# 1. Packages. busybox-static is checked on its own: the dynamic busybox
# package also provides /bin/busybox but cannot run in an empty rootfs.
missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
command -v runc >/dev/null 2>&1 || missing+=(runc)
dpkg-query -W -f='${Status}' catatonit 2>/dev/null | grep -q 'ok installed' || missing+=(catatonit)
dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed' || missing+=(busybox-static)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; then
    apt-get update -qq >/dev/null
    apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
else
  say "podman, runc, catatonit and busybox-static already installed"
fi

# 2. Engine settings. A drop-in leaves any containers.conf of the machine's
# owner alone; files in containers.conf.d override it key by key.
want=$(cat <<'EOF'
# Written by grapnel scripts/podman-setup.sh: podman as root works on this
# kind of machine (no systemd, low default limits) only with these.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
)
if [ -f "$conf" ] && [ "$(cat "$conf")" = "$want" ]; then
  say "$conf already up to date"
else
  mkdir -p "$conf_dir"
  printf '%s\n' "$want" >"$conf"
  say "wrote $conf"
fi

# Check that podman took the settings: an older podman that ignores
# containers.conf.d would silently keep its defaults.
got=$(podman info --format '{{.Host.OCIRuntime.Name}} {{.Host.CgroupManager}} {{.Host.EventLogger}}')
if [ "$got" != "runc cgroupfs file" ]; then
  say "podman info reports '$got', want 'runc cgroupfs file'" >&2
  exit 1
fi

# 3. The test image: busybox as /bin/busybox plus one symlink per applet.
if podman image exists "$image"; then
  say "image $image already present"
else
  root=$(mktemp -d /tmp/grapnel-rootfs.XXXXXX)
  trap 'rm -rf "$root" "$root.tar"' EXIT
  mkdir -p "$root"/{bin,dev,etc,proc,sys,tmp,run,root,var}
  chmod 1777 "$root/tmp"
  cp /bin/busybox "$root/bin/busybox"
  n=0
  for applet in $("$root/bin/busybox" --list); do
    [ "$applet" = busybox ] && continue
    ln -s busybox "$root/bin/$applet"
    n=$((n + 1))
  done
  printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\n' >"$root/etc/group"
  tar -C "$root" -cf "$root.tar" .
  podman import --quiet \
    --change 'ENV=PATH=/bin' \
    --change 'CMD=["/bin/sh"]' \
    "$root.tar" "$image" >/dev/null
  rm -f "$root.tar"
  say "built $image from busybox-static ($n applets)"
fi

# 4. Smoke test: the image runs under these settings, with their limits.
nofile=$(podman run --rm "$image" sh -c 'ulimit -n')
if [ "$nofile" != 20000 ]; then
  say "smoke test: a container sees nofile=$nofile, want 20000" >&2
  exit 1
fi
say "smoke test passed: podman runs $image"

# 5. Smoke test of podman-kube: a pod plays (podman builds its pause image
# offline from catatonit) and goes down again.
pod=grapnel-setup-smoke
manifest="apiVersion: v1
kind: Pod
metadata:
  name: $pod
spec:
  restartPolicy: Never
  containers:
  - name: app
    image: $image
    command: [\"true\"]"
podman pod rm --force --ignore "$pod" >/dev/null
if ! printf '%s\n' "$manifest" | podman kube play --quiet - >/dev/null; then
  say "smoke test: podman kube play failed" >&2
  exit 1
fi
printf '%s\n' "$manifest" | podman kube down - >/dev/null
say "smoke test passed: podman kube play runs a pod of $image"
