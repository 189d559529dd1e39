#!/usr/bin/env bash
# make demo: starts one grapnel-server replica with a startup manifest,
# shows `grapnel get state` and `grapnel get workloads`, then stops it.
# DEMO_KEEP=1 leaves the replica running until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d /tmp/grapnel-demo.XXXXXX)
port=${DEMO_PORT:-25551}
raft=${DEMO_RAFT_PORT:-25561}
addr=127.0.0.1:$port
cleanup() {
  [ -n "${pid:-}" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "== starting grapnel-server (one replica) on $addr, data in $work"
./bin/grapnel-server -k --name demo-1 --data-dir "$work/data" -a "$addr" --raft-address "127.0.0.1:$raft" \
  -m deploy/examples/demo-manifest.yaml >"$work/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  if ./bin/grapnel -k -s "$addr" get workloads >/dev/null 2>&1; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$work/server.log"; echo "grapnel-server exited"; exit 1; fi
  sleep 0.1
done
echo
echo "== grapnel get state"
./bin/grapnel -k -s "$addr" get state
echo
echo "== grapnel get workloads"
./bin/grapnel -k -s "$addr" get workloads
echo
if [ "${DEMO_KEEP:-}" = 1 ]; then
  echo "replica running on $addr; Ctrl-C stops it"
  wait "$pid"
fi
