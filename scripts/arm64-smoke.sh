#!/usr/bin/env bash
# aarch64 smoke test (issue 32): sets up qemu-user for arm64 binaries
# (Debian's qemu-user-binfmt; binfmt_misc mounted; the qemu-aarch64
# entry registered), then runs chaos/e2e's
# TestArm64WorkloadsSurviveLeaderKill: the install built for arm64
# (GOARCH=arm64, as `make build-arm64`), three replicas, two agents,
# process workloads Running, a leader kill, no workload restarted.
# On an arm64 machine the binaries run natively and no setup is done.
# Any step that fails fails the script (CI runs it: a machine that cannot
# run the arm64 build fails, it does not skip). Needs root for the setup.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/go/bin:$PATH"

fail() { echo "arm64-smoke: $*" >&2; exit 1; }

binfmt=/proc/sys/fs/binfmt_misc
conf=/usr/lib/binfmt.d/qemu-aarch64.conf
if [ "$(uname -m)" != aarch64 ]; then
  if [ ! -f "$conf" ]; then
    echo "arm64-smoke: installing qemu-user-binfmt"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq qemu-user-binfmt >/dev/null 2>&1 ||
      { apt-get update -qq >/dev/null && apt-get install -y -qq qemu-user-binfmt >/dev/null; } ||
      fail "could not install qemu-user-binfmt"
    [ -f "$conf" ] || fail "qemu-user-binfmt installed no $conf"
  fi
  if [ ! -e "$binfmt/register" ]; then
    mount -t binfmt_misc binfmt_misc "$binfmt" || fail "could not mount binfmt_misc on $binfmt"
  fi
  # The entry's name is the second field of the line (":name:type:...").
  line=$(grep -v '^\s*#' "$conf" | grep -m1 ':') || fail "$conf holds no entry"
  name=$(cut -d: -f2 <<<"$line")
  if [ ! -e "$binfmt/$name" ]; then
    printf '%s' "$line" >"$binfmt/register" || fail "could not register $name in $binfmt/register"
  fi
  [ "$(head -1 "$binfmt/$name")" = enabled ] || fail "$binfmt/$name is not enabled"
  interp=$(awk '$1 == "interpreter" {print $2}' "$binfmt/$name")
  [ -x "$interp" ] || fail "the interpreter $interp of $name is missing"
  echo "arm64-smoke: $name registered ($interp)"
fi
start=$(date +%s)
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
GRAPNEL_ARM64_SMOKE=1 go test -count=1 -timeout 10m -v -run '^TestArm64WorkloadsSurviveLeaderKill$' ./chaos/e2e/ >"$log" 2>&1 || status=$?
# The test's own lines; all of it when it failed.
if [ $status -eq 0 ]; then
  grep -E '^(=== RUN|--- |\s+\S+_test\.go:|ok|PASS)' "$log" || true
else
  cat "$log"
fi
echo "arm64-smoke: $(( $(date +%s) - start )) s"
exit "$status"
